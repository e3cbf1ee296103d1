"""What corral tells operators: /metrics, log lines, the analytics topic, summarised warnings."""
