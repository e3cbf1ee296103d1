"""The ShareAcknowledge API (reference/share-groups.md §4): a member's acknowledgements outside a
fetch, in its share session (epoch > 0, or -1 to close it after them). Answered once every
partition's change is durable in `__share_group_state`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ErrorCode
from corral.later import wait
from corral.network.apis import ApiKey, handles
from corral.shares.acknowledgements import acknowledge_topics
from corral.shares.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from corral.shares.share_fetch import by_topic, request_error

if TYPE_CHECKING:
    from corral._core import Request
    from corral.broker import Broker
    from corral.shares.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse


def _error(code: ErrorCode) -> ShareAcknowledgeResponse:
    return {"error_code": code, "responses": [], "node_endpoints": []}


@handles(ApiKey.SHARE_ACKNOWLEDGE, 1, 2)
async def share_acknowledge(
    broker: Broker, request: Request[ShareAcknowledgeRequest]
) -> ShareAcknowledgeResponse:
    body, version = request.body, request.api_version
    group_id, member_id = body["group_id"], body["member_id"]
    refused = request_error(broker, request, group_id, member_id)
    if refused is not None:
        return _error(refused)
    shares = broker.shares
    assert shares is not None and group_id is not None and member_id is not None, "checked"
    epoch = body["share_session_epoch"]
    if epoch == INITIAL_EPOCH:
        return _error(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    session = shares.sessions.check(group_id, member_id, epoch)
    if not isinstance(session, ShareSession):
        return _error(session)
    if epoch != FINAL_EPOCH:
        session.next_epoch()
    renew = version >= 2 and body["is_renew_ack"]
    results = acknowledge_topics(broker, request, group_id, member_id, body["topics"], renew)
    codes = {key: await wait(later) for key, later in results.items()}
    if epoch == FINAL_EPOCH:
        shares.end_session(session)
    answer: ShareAcknowledgeResponse = {
        "error_code": ErrorCode.NONE,
        "responses": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition_index": index,
                        "error_code": codes[(topic_id, index)][0],
                        "error_message": codes[(topic_id, index)][1],
                        "current_leader": {"leader_id": -1, "leader_epoch": -1},
                    }
                    for index in indexes
                ],
            }
            for topic_id, indexes in by_topic(codes).items()
        ],
        "node_endpoints": [],
    }
    if version >= 2:
        answer["acquisition_lock_timeout_ms"] = shares.lock_duration_ms(group_id)
    return answer
