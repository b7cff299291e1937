"""From Kubernetes objects to snapshots, and from decisions back to the cluster."""
