"""DescribeCluster over TCP answers as Kafka does where corral differs from a controller (the error
code tables themselves: tests/unit/test_errors.py)."""

from __future__ import annotations

from rawwire import RawClient

from corral.network.apis import ApiKey


def test_describe_cluster_for_controllers_answers_unsupported_endpoint_type(shared_corral):
    # corral's hand-written table had 119 (Kafka's INVALID_REGISTRATION) for this until the
    # table came from the crate.
    with RawClient(shared_corral.port) as client:
        response = client.call(
            ApiKey.DESCRIBE_CLUSTER,
            1,
            {"endpoint_type": 2, "include_cluster_authorized_operations": False},
        )
    assert response["error_code"] == 115
