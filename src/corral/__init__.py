"""corral: a Kafka-wire-compatible broker built around a group coordinator."""

__version__ = "0.1.0"
