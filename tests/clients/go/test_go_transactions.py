"""franz-go's transactions against a real corral (tests/clients/go/franz_txn.go): a transactional
producer commits every other transaction of ten records and aborts the rest, and a read-committed
consumer sees exactly the committed records."""

from __future__ import annotations

import polyglot
from confluent_kafka.admin import AdminClient, NewTopic


def test_franz_go_read_committed_sees_exactly_the_committed_transactions(corral):
    admin = AdminClient({"bootstrap.servers": corral.bootstrap})
    admin.create_topics([NewTopic("franz-txn", 3, 1)])["franz-txn"].result(10)
    report = polyglot.txn({"bootstrap": corral.bootstrap, "topic": "franz-txn", "count": 100})
    assert "error" not in report, report
    assert len(report["committed"]) == 50
    assert report["seen"] == report["committed"]
