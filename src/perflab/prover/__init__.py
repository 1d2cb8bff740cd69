"""Study 3/4: a batched, compiled theorem-prover evaluation (see notebooks/03_eval, 04_early_exit)."""
