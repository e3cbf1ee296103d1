"""Configuration: settings by Kafka's names, their types, dynamic configs, logger levels, quotas,
and the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
DescribeClientQuotas)."""
