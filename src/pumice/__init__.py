"""pumice: a batch and gang scheduler for Kubernetes, compatible with Volcano."""

__version__ = "0.1.0"
