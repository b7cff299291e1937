"""The domain model: resources, tasks, jobs, nodes and queues. Pure, no I/O."""
