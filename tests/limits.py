"""Time limits of the tests: hang guards only, never claims about speed (a slow or loaded machine must pass).

A subprocess or a wait that exceeds ``HANG_S`` has hung; no test asserts how fast anything ran (speed is
measured by ``benchmarks/``)."""

HANG_S = 1800
