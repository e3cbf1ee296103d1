"""`corral load`: a load generator for consumer groups, for any Kafka-compatible broker."""
