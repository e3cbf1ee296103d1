"""Operator tools over corral's own client code (raw Kafka frames through the compiled codec)."""
