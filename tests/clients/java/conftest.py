"""`crashable_broker`: the same test against corral and against Apache Kafka 4.4 (the reference
broker of benches/kafka_ref.py), each killed with kill -9 and restarted on its data and port by
`crash_restart()`. The Kafka variant checks the harness itself: a test's expectations hold on
the broker corral copies, so a corral failure is corral's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest


@dataclass
class CrashableBroker:
    name: str
    bootstrap: str
    crash_restart: Callable[[], None]


@pytest.fixture(params=["corral", pytest.param("kafka", marks=pytest.mark.kafka)])
def crashable_broker(request, corral_factory) -> Iterator[CrashableBroker]:
    if request.param == "corral":
        corral = corral_factory(**{"group.initial.rebalance.delay.ms": 0})

        def restart_corral() -> None:
            corral.kill()
            corral.start()

        yield CrashableBroker("corral", corral.bootstrap, restart_corral)
        return
    from kafka_ref import KafkaBroker

    # Half the default heap: a Streams application or a Connect worker runs beside it on 2 cores.
    kafka = KafkaBroker(settings={"group.initial.rebalance.delay.ms": 0}, heap="512m")
    kafka.start()
    try:

        def restart_kafka() -> None:
            kafka.restart(kill=True)

        yield CrashableBroker("kafka", kafka.bootstrap, restart_kafka)
    finally:
        kafka.stop()
