"""The three documents mascot implements, as studies built on the library: their reproductions, the
generators of the committed ``results/``, their reports' prose and errata, and the calibrations to their
tables. Nothing in the library imports this package (``tests/test_layers.py``); only the command line does
(``mascot reproduce``).

* :mod:`~mascot.studies.consensus`, :mod:`~mascot.studies.consensus_report`: the consensus paper's Sec. V-A/B
  (Tables IV-VI, the ring order, Theorem 1, Fig. 3, errata);
* :mod:`~mascot.studies.spectra`, :mod:`~mascot.studies.spectra_errata`: the successor-representation paper's
  Table 1, A.5-A.6, drift gains and errata;
* :mod:`~mascot.studies.trials`: the SR paper's Table 2 and Figs 2-6 on the surrogate;
* :mod:`~mascot.studies.deliberation`, :mod:`~mascot.studies.deliberation_readme`: the consensus paper's
  Sec. V-C (Table VIII, Fig. 4, the monitor, token scaling, Table VII);
* :mod:`~mascot.studies.debate`: the voting-and-debate article's examples.
"""
