//! ConsumerGroupHeartbeat's short path (short_paths/mod.rs): the steady-state request of every
//! KIP-848 consumer group member.
//!
//! The network thread answers it from the `ConsumerHeartbeatView` when the request changes
//! nothing (an incremental heartbeat: no rebalance timeout, subscription, regex, assignor, rack
//! or owned partitions) and the view says its member is STABLE at the epoch of a settled group.
//! Every other ConsumerGroupHeartbeat goes to the coordinator as a
//! `ConsumerGroupHeartbeatRequest` (its handler reads `Request.body`, made from the struct).

use bytes::Bytes;
use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
use pyo3::prelude::*;

use crate::groups::consumer_epoch_moves::response;
use crate::groups::consumer_heartbeat_view::Steady;
use crate::short_paths::commit_path::Took;
use crate::short_paths::{short_path_request, Sender, ShortPath, Views};

short_path_request! {
    /// A decoded ConsumerGroupHeartbeat (Python: `ConsumerGroupHeartbeatRequest`).
    ConsumerHeartbeat, "ConsumerGroupHeartbeatRequest", ConsumerGroupHeartbeatRequest
}

impl ShortPath for ConsumerHeartbeat {
    /// The view's answer to a heartbeat that changes nothing. What the coordinator checks
    /// before the group (blank ids: INVALID_REQUEST; an assignor: UNSUPPORTED_ASSIGNOR) is left
    /// to it by `changes_nothing`.
    fn answer(&self, views: &Views, sender: &Sender<'_>) -> Option<(Bytes, i16)> {
        let view = views.consumer_heartbeat.as_ref()?.get();
        let hb = &self.body;
        if !changes_nothing(hb) {
            return None;
        }
        let interval = view.answer(&steady(hb, sender))?;
        Some((
            response(
                self.api_version,
                self.correlation_id,
                &hb.member_id,
                hb.member_epoch,
                interval,
                0,
            ),
            0,
        ))
    }
}

impl ConsumerHeartbeat {
    /// The heartbeat of a member the network thread moves to its group's target epoch
    /// (consumer_epoch_moves.rs), written by the commit path and answered after its fsync;
    /// None: the coordinator's.
    pub fn take(&self, views: &Views, sender: &Sender<'_>, connection: u64) -> Option<Took> {
        let view = views.consumer_heartbeat.as_ref()?.get();
        let path = views.commit_path.as_ref()?.get();
        let hb = &self.body;
        if !changes_nothing(hb) {
            return None;
        }
        view.take_move(
            path,
            &steady(hb, sender),
            (connection, self.api_version, self.correlation_id),
        )
    }
}

/// The request as the view judges it, with its sender.
fn steady<'a>(hb: &'a ConsumerGroupHeartbeatRequest, sender: &Sender<'a>) -> Steady<'a> {
    Steady {
        group_id: &hb.group_id,
        member_id: &hb.member_id,
        instance_id: hb.instance_id.as_deref(),
        member_epoch: hb.member_epoch,
        client_id: sender.client_id.unwrap_or(""),
        client_host: sender.client_host,
    }
}

/// An incremental heartbeat of a member that already has an epoch, every optional field null
/// or -1 ("unchanged"), its ids not blank. Conservative on blankness: an id starting with
/// whitespace or a control character goes to the coordinator, whose `strip()` decides.
fn changes_nothing(hb: &ConsumerGroupHeartbeatRequest) -> bool {
    fn plain(s: &str) -> bool {
        s.chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && !c.is_control())
    }
    hb.member_epoch > 0
        && hb.rebalance_timeout_ms == -1
        && hb.subscribed_topic_names.is_none()
        && hb.subscribed_topic_regex.is_none()
        && hb.server_assignor.is_none()
        && hb.rack_id.is_none()
        && hb.topic_partitions.is_none()
        && plain(&hb.member_id)
        && plain(&hb.group_id)
        && hb.instance_id.as_deref().is_none_or(plain)
}

#[pymethods]
impl ConsumerHeartbeat {
    #[getter]
    fn group_id(&self) -> &str {
        &self.body.group_id
    }

    #[getter]
    fn member_id(&self) -> &str {
        &self.body.member_id
    }

    #[getter]
    fn member_epoch(&self) -> i32 {
        self.body.member_epoch
    }

    fn __repr__(&self) -> String {
        let hb = &self.body;
        format!(
            "ConsumerGroupHeartbeatRequest(group_id={:?}, member_id={:?}, member_epoch={}, instance_id={:?})",
            hb.group_id.as_str(),
            hb.member_id.as_str(),
            hb.member_epoch,
            hb.instance_id.as_deref()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
    use kafka_protocol::messages::{ConsumerGroupHeartbeatResponse, GroupId, TopicName};
    use kafka_protocol::protocol::{Decodable, StrBytes};

    fn steady() -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_member_epoch(3)
    }

    #[test]
    fn the_default_request_is_incremental() {
        // kafka-protocol's defaults are the schema's: -1 and nulls, i.e. "unchanged".
        assert!(changes_nothing(&steady()));
    }

    #[test]
    fn any_change_or_doubtful_id_goes_to_the_coordinator() {
        let s = |v: &'static str| Some(StrBytes::from_static_str(v));
        let changed = [
            steady().with_member_epoch(0),
            steady().with_member_epoch(-1),
            steady().with_member_epoch(-2),
            steady().with_rebalance_timeout_ms(300_000),
            steady()
                .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))])),
            steady().with_subscribed_topic_names(Some(vec![])),
            steady().with_subscribed_topic_regex(s("t.*")),
            steady().with_server_assignor(s("uniform")),
            steady().with_rack_id(s("r")),
            steady().with_topic_partitions(Some(vec![])),
            steady().with_topic_partitions(Some(vec![TopicPartitions::default()])),
            steady().with_member_id(StrBytes::from_static_str("")),
            steady().with_member_id(StrBytes::from_static_str(" m")),
            steady().with_group_id(GroupId(StrBytes::from_static_str(""))),
            steady().with_group_id(GroupId(StrBytes::from_static_str("\u{1c}g"))),
            steady().with_instance_id(s("")),
            steady().with_instance_id(s("\u{a0}")),
        ];
        for request in changed {
            assert!(!changes_nothing(&request), "{request:?}");
        }
        assert!(changes_nothing(&steady().with_instance_id(s("i"))));
    }

    #[test]
    fn responses_carry_the_member_epoch_and_interval_in_every_version() {
        for version in 0..=1 {
            let frame = response(version, 42, "m-1", 7, 5_000, 0);
            assert_eq!(
                i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
                frame.len() - 4
            );
            assert_eq!(i32::from_be_bytes(frame[4..8].try_into().unwrap()), 42);
            // Response header v1: the correlation id, then an empty tagged-field section.
            assert_eq!(frame[8], 0);
            let decoded =
                ConsumerGroupHeartbeatResponse::decode(&mut frame.slice(9..), version).unwrap();
            assert_eq!(
                decoded,
                ConsumerGroupHeartbeatResponse::default()
                    .with_member_id(Some(StrBytes::from_static_str("m-1")))
                    .with_member_epoch(7)
                    .with_heartbeat_interval_ms(5_000)
            );
            assert_eq!(
                (
                    decoded.error_code,
                    decoded.error_message,
                    decoded.assignment
                ),
                (0, None, None)
            );
        }
    }
}
