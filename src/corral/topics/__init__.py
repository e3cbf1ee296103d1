"""Topics: the registry (names, ids, partitions, configs), Metadata, and the topic admin APIs."""
