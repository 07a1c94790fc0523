"""The measurements behind the notebooks' figures and the paper claims they read: draft acceptance and arms
(notebook 01), replay sweeps and their claims (02), token tables, calibration and entropy (04-07), classifier surfaces
(08) and mask sparsity (09)."""
