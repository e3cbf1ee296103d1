"""Partition storage and the data plane: the log store's partitions, Produce, Fetch, ListOffsets,
DeleteRecords, DescribeLogDirs and producer ids."""
