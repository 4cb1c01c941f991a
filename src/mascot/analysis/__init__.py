"""Paper tables, figures and statistics built from kernel outputs (the I/O shell around the kernels)."""
