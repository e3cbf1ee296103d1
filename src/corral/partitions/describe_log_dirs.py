"""DescribeLogDirs (kafka-log-dirs): one log dir, the data dir, with each partition's size on
disk. As Kafka answers with one replica and no tiered storage: a partition's offset lag is 0 and it
is never a future replica."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.network.apis import ApiKey, handles
from corral.partitions.store import StorageError, storage_warning
from corral.security.acls import AclOperation
from corral.security.authorize import cluster_allowed

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.partitions.messages import (
        DescribeLogDirsPartition,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        DescribeLogDirsResult,
        DescribeLogDirsTopic,
    )


@handles(ApiKey.DESCRIBE_LOG_DIRS, 1, 4)
def describe_log_dirs(
    broker: Broker, request: Request[DescribeLogDirsRequest]
) -> DescribeLogDirsResponse:
    if not cluster_allowed(broker, request, AclOperation.DESCRIBE):
        # v3+ says why; older versions only get no log dir.
        return {"results": [], "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    wanted = request.body["topics"]
    # None: every partition; otherwise the listed ones that exist (others are left out, as Kafka).
    chosen: dict[str, set[int]] | None = None
    if wanted is not None:
        chosen = {}
        for t in wanted:
            chosen.setdefault(t["topic"], set()).update(t["partitions"])
    names = list(broker.topics.by_name) if chosen is None else list(chosen)
    topics: list[DescribeLogDirsTopic] = []
    for topic in filter(None, map(broker.topics.get, names)):
        partitions: list[DescribeLogDirsPartition] = []
        for index in range(topic.partitions):
            if chosen is not None and index not in chosen[topic.name]:
                continue
            try:
                size = broker.logs.size(topic, index)
            except StorageError as e:
                # Kafka lists only the logs it has online.
                storage_warning(
                    "describe_log_dirs", "DescribeLogDirs left out %s-%d: %s", topic.name, index, e
                )
                continue
            partitions.append(
                {
                    "partition_index": index,
                    "partition_size": size,
                    "offset_lag": 0,
                    "is_future_key": False,
                }
            )
        if partitions:
            topics.append({"name": topic.name, "partitions": partitions})
    log_dir = os.path.abspath(broker.data_dir)
    result: DescribeLogDirsResult = {"log_dir": log_dir, "topics": topics}
    try:
        fs = os.statvfs(log_dir)
    except OSError as e:
        storage_warning("describe_log_dirs", "DescribeLogDirs: %s is offline: %s", log_dir, e)
        result = {"log_dir": log_dir, "error_code": ErrorCode.KAFKA_STORAGE_ERROR}
    else:
        # Java's FileStore.getTotalSpace and getUsableSpace.
        result.update(
            {"total_bytes": fs.f_blocks * fs.f_frsize, "usable_bytes": fs.f_bavail * fs.f_frsize}
        )
    return {"results": [result]}
