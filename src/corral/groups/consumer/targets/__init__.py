"""A consumer group's target assignment (Kafka's TargetAssignmentBuilder and its scheduling):
inputs.py, what a computation reads (the topic image, the members) and the records of its result;
computation.py (`TargetComputation`), when a target is computed, inline or in a worker thread;
incremental.py, the small changes (a member joins or leaves) answered without the assignor."""
