"""The network front: listeners, the file-descriptor budget, and the API table."""
