"""Acknowledged topic creations and deletions survive kill -9 of a real corral (confluent-kafka's
AdminClient). (The registry itself, in process: tests/unit/topics/test_registry.py.)"""

from __future__ import annotations


def test_acknowledged_topic_changes_survive_kill_9(corral):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": corral.bootstrap})
    names = [f"reg-{i}" for i in range(200)]
    for future in admin.create_topics([NewTopic(n, 2) for n in names]).values():
        future.result(timeout=30)
    gone = names[::2]
    for future in admin.delete_topics(gone).values():
        future.result(timeout=30)
    # A deleted name is free again once its deletion was acknowledged.
    admin.create_topics([NewTopic("reg-0", 5)])["reg-0"].result(timeout=30)
    corral.kill()
    corral.start()
    listed = AdminClient({"bootstrap.servers": corral.bootstrap}).list_topics(timeout=10).topics
    expected = (set(names) - set(gone)) | {"reg-0"}
    assert {n for n in listed if n.startswith("reg-")} == expected
    assert len(listed["reg-0"].partitions) == 5
