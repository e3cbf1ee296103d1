"""`corral analyze`: consumer-lag analytics. `rules` holds the pure rules the Spark job applies."""
