"""Fault injection: corral misbehaving on cue for other people's resilience tests (docs/faults.md).

model.py: a fault (match, action, limits) from its JSON form; targets.py: what a request is about
(groups, topics, partitions, members); registry.py: the faults in force and the matching the
dispatch asks for; answers.py: Kafka's error response of each API; inject.py: what the server
does with a request a fault took (answer, delay, hold, close) and the short paths' switch;
http.py: the admin endpoint on corral.faults.listen; client.py: a Python client of it; cli.py:
`corral faults ...`; metrics.py: the /metrics families; settings.py: the settings; scenario.py:
the seeded TOML scenario file of `corral serve --faults FILE`; broker.py: the faults on the broker
rather than on requests (group faults, coordinator shard unloads, storage faults, refused
connections).

Where the rest of issue 31 goes: another per-request action is a kind in model.py (`KINDS`,
`_action`) and a branch in `Injector._divert`; a fault on the broker rather than on requests
(a coordinator shard unloaded and reloaded, a member fenced, fsync failing) acts when it starts
and ends, through the registry's `on_change`/`on_end` hooks, and is listed, counted and logged
the same way. A scenario file is a list of the same JSON objects (`model.parse`), each seeded
(scenario.py); the pytest plugin that starts a broker for a test is corral/testing/.
"""
