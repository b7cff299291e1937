"""``pumice run``: the scheduler against a real cluster, and what it reports about itself."""
