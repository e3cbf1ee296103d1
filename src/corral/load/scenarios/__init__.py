"""Scenarios of `corral load`: each module has NAME, HELP, REQUIRED_APIS, add_arguments(parser),
topic_partitions(params), run_member(ctx, member, index) (in a worker, once per member),
control(run) (in the parent, twice a second: None, a new phase dict for the workers, or "stop")
and summary(run) (the scenario's figures for the result)."""

from corral.load.scenarios import churn, commit, failover, heartbeat, join_storm, share

SCENARIOS = {m.NAME: m for m in (join_storm, heartbeat, commit, churn, failover, share)}
