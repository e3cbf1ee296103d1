"""Fault injection: corral misbehaving on cue for other people's resilience tests (docs/faults.md).

model.py: a fault (match, action, limits) from its JSON form; targets.py: what a request is about
(groups, topics, partitions, members); registry.py: the faults in force and the matching the
dispatch asks for; answers.py: Kafka's error response of each API; inject.py: what the server
does with a request a fault took (answer, delay, hold, close) and the short paths' switch;
http.py: the admin endpoint on corral.faults.listen; client.py: a Python client of it; cli.py:
`corral faults ...`; metrics.py: the /metrics families; settings.py: the settings.
"""
