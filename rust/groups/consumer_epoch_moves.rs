//! What the network thread decides about a consumer-group member's incremental heartbeat
//! (`judge`), and the one change it makes itself: moving a member to its group's new target
//! epoch when the target did not change the member's partitions (issue 29).
//!
//! After a target computation every member has to reach the new target epoch, and each does so
//! at its next heartbeat; in a big group most members' partitions did not change, and for each
//! of those Kafka's reconciliation writes the member's current-assignment record again with the
//! new epoch and the old one as previous epoch, nothing else changed (kept partitions keep
//! their assignment epochs, KIP-1251). The coordinator gives the view that record's value for
//! every member STABLE with exactly its target (`MemberView::movable`) and drops it when the
//! member's target changes, so the network thread can write the move byte for byte as the
//! coordinator would (`move_record`), through the commit path (append, group commit, answer),
//! and tell Python (`CommitPath.drain_moves`).
//!
//! The intervals answered follow answer.py's rule (`adaptive_interval_ms`, the same function),
//! with one difference: the rate bound counts every member of the group as reconciling (the
//! coordinator counts those not STABLE at the group epoch), so the network thread's intervals
//! are never shorter than the coordinator's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ConsumerGroupHeartbeatResponse;
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use kafka_protocol::ResponseError;
use pyo3::prelude::*;

use crate::codec::header;
use crate::groups::consumer_heartbeat_view::{wall_ms, ConsumerHeartbeatView, GroupView, Steady};
use crate::log::batch::{self, KeyValue, NO_PRODUCER};
use crate::short_paths::commit_path::{CommitPath, Took};

/// The record type of ConsumerGroupCurrentMemberAssignmentKey.
const CURRENT_ASSIGNMENT: i16 = 8;
/// A failed append or fsync of the coordinator answers NOT_COORDINATOR, as in Kafka.
const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();
/// Once a group's next target is due, one heartbeat in this many ms goes to the coordinator,
/// which starts computing it; the others are answered toward the current target meanwhile (as
/// before it was due). Sending every one would queue thousands behind the one that starts it.
const DUE_ASK_MS: i64 = 200;

/// What the network thread does with an incremental heartbeat that changes nothing.
#[derive(Debug, PartialEq)]
pub enum Judged {
    /// The member is STABLE at the target epoch: answered with this interval.
    Steady(i32),
    /// The member is STABLE behind the target with exactly its target: moved to `epoch`.
    Move {
        epoch: i32,
        previous: i32,
        interval: i32,
    },
}

impl ConsumerHeartbeatView {
    /// The network thread's verdict on an incremental heartbeat (None: the coordinator's). A
    /// group computing a target, whose subscribed topics changed or that is being deleted is
    /// the coordinator's. Once its next target is due, one heartbeat per `DUE_ASK_MS` is (the
    /// coordinator starts the computation); `may_ask`: this call may be that one (the last
    /// look at the request, `take_move`), else it leaves the choice to that call.
    pub(crate) fn judge(
        &self,
        groups: &HashMap<Box<str>, GroupView>,
        hb: &Steady<'_>,
        now_ms: i64,
        may_ask: bool,
    ) -> Option<Judged> {
        if hb.member_epoch <= 0 {
            return None;
        }
        let group = groups.get(hb.group_id)?;
        if group.busy || group.group_epoch < group.assignment_epoch {
            return None;
        }
        let behind = group.group_epoch > group.assignment_epoch;
        if behind && now_ms >= group.target_due_ms {
            let asked = group.due_asked_ms.load(Ordering::Relaxed);
            if now_ms.saturating_sub(asked) >= DUE_ASK_MS {
                if may_ask {
                    group.due_asked_ms.store(now_ms, Ordering::Relaxed);
                }
                return None;
            }
        }
        let member = group.members.get(hb.member_id)?;
        if member.epoch != hb.member_epoch
            || !member.stable
            || !member.consumer
            || member.timer_key == 0
        {
            return None;
        }
        if hb.instance_id.is_some() && hb.instance_id != member.instance_id.as_deref() {
            return None; // another instance: fenced or unknown
        }
        if *member.client_id != *hb.client_id || *member.client_host != *hb.client_host {
            return None; // the coordinator writes the member's new client id or host
        }
        let (_, group_ms) = self.timing(hb.group_id);
        let due_in_ms = behind.then(|| group.target_due_ms - now_ms);
        let members = group.members.len();
        let rule = |behind: bool, settling: bool| {
            let short_ms = self.short_ms.load(Ordering::Relaxed);
            let max_rate = self.max_rate.load(Ordering::Relaxed);
            adaptive_interval_ms(
                group_ms,
                short_ms,
                max_rate,
                true,
                behind,
                members,
                due_in_ms,
                jitter(),
                settling,
                members,
            )
        };
        if member.epoch == group.assignment_epoch {
            return Some(Judged::Steady(if behind {
                rule(true, false)
            } else {
                group_ms
            }));
        }
        let movable = member.movable.is_some() && self.moves_enabled.load(Ordering::Relaxed);
        if member.epoch > group.assignment_epoch
            || !movable
            || group.assignment_epoch < group.moves_from
        {
            return None;
        }
        let settling = now_ms < group.assignment_ms.saturating_add(i64::from(group_ms));
        Some(Judged::Move {
            epoch: group.assignment_epoch,
            previous: member.epoch,
            interval: rule(behind, settling),
        })
    }

    /// Moves the heartbeat's member to its group's target epoch, when `judge` says so: its
    /// record appended through `path` (held for the group), the view and its session deadline
    /// updated; answered by the path after the fsync. None: the coordinator's.
    pub(crate) fn take_move(
        &self,
        path: &CommitPath,
        hb: &Steady<'_>,
        reply: (u64, i16, i32),
    ) -> Option<Took> {
        let (connection, api_version, correlation_id) = reply;
        let write = path.lock_for(hb.group_id)?;
        let mut groups = self.lock();
        let now = wall_ms();
        let Some(Judged::Move {
            epoch,
            previous,
            interval,
        }) = self.judge(&groups, hb, now, true)
        else {
            return None;
        };
        let member = groups.get_mut(hb.group_id)?.members.get_mut(hb.member_id)?;
        let record = move_record(
            hb.group_id,
            hb.member_id,
            member.movable.as_deref()?,
            epoch,
            previous,
        )?;
        let appended = write.append(batch::build(&[record], now, NO_PRODUCER))?;
        member.epoch = epoch;
        let timer_key = member.timer_key;
        drop(groups);
        self.move_deadline(hb.group_id, timer_key);
        self.moved.fetch_add(1, Ordering::Relaxed);
        let accepted = response(
            api_version,
            correlation_id,
            hb.member_id,
            epoch,
            interval,
            0,
        );
        let failure = response(
            api_version,
            correlation_id,
            hb.member_id,
            0,
            0,
            NOT_COORDINATOR,
        );
        let moved = (
            hb.group_id.to_owned(),
            hb.member_id.to_owned(),
            epoch,
            previous,
        );
        Some(write.moved(appended, moved, connection, accepted, failure))
    }
}

/// The member's current-assignment record at `epoch` (previous epoch `previous`) from its
/// record's value at the epoch it has: the value's two leading int32 fields after the version
/// are MemberEpoch and PreviousMemberEpoch; the state (STABLE), the partitions and their
/// assignment epochs stay. None for a key too long for the record format.
pub(crate) fn move_record(
    group_id: &str,
    member_id: &str,
    value: &[u8],
    epoch: i32,
    previous: i32,
) -> Option<KeyValue> {
    if value.len() < 11 {
        return None;
    }
    let mut key = Vec::with_capacity(6 + group_id.len() + member_id.len());
    key.extend_from_slice(&CURRENT_ASSIGNMENT.to_be_bytes());
    for text in [group_id, member_id] {
        key.extend_from_slice(&i16::try_from(text.len()).ok()?.to_be_bytes());
        key.extend_from_slice(text.as_bytes());
    }
    let mut moved = value.to_vec();
    moved[2..6].copy_from_slice(&epoch.to_be_bytes());
    moved[6..10].copy_from_slice(&previous.to_be_bytes());
    Some((Some(key), Some(moved)))
}

/// A ConsumerGroupHeartbeat answer without assignment: the member's id and epoch and the
/// interval, or an error (`error_code` != 0: no member id, epoch 0, interval 0, as the
/// coordinator's error answers).
pub(crate) fn response(
    api_version: i16,
    correlation_id: i32,
    member_id: &str,
    member_epoch: i32,
    interval_ms: i32,
    error_code: i16,
) -> Bytes {
    let mut out = BytesMut::with_capacity(64 + member_id.len());
    header::begin_response(
        &mut out,
        correlation_id,
        ConsumerGroupHeartbeatResponse::header_version(api_version),
    );
    let member_id = (error_code == 0)
        .then(|| kafka_protocol::protocol::StrBytes::from_string(member_id.to_owned()));
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(error_code)
        .with_member_id(member_id)
        .with_member_epoch(member_epoch)
        .with_heartbeat_interval_ms(interval_ms)
        .encode(&mut out, api_version)
        .expect("a ConsumerGroupHeartbeat response encodes in every version");
    header::finish_frame(&mut out);
    out.freeze()
}

/// answer.py's `adaptive_interval_ms`, the same rule (tests/wire/test_consumer_epoch_moves.py compares
/// them; Python calls it with keywords after `max_rate`).
#[pyfunction]
#[pyo3(signature = (group_ms, short_ms, max_rate, *, stable, behind, reconciling, due_in_ms, jitter, settling=false, members=0))]
#[allow(clippy::too_many_arguments)]
pub fn adaptive_interval_ms(
    group_ms: i32,
    short_ms: i32,
    max_rate: i32,
    stable: bool,
    behind: bool,
    reconciling: usize,
    due_in_ms: Option<i64>,
    jitter: f64,
    settling: bool,
    members: usize,
) -> i32 {
    if short_ms <= 0 || short_ms >= group_ms {
        return group_ms;
    }
    let mut reconciling = reconciling as i64;
    if stable && !behind {
        if !settling {
            return group_ms;
        }
        reconciling = reconciling.max(members as i64);
    }
    let max_rate = i64::from(max_rate.max(1));
    let mut interval = i64::from(short_ms).max((reconciling * 1000 + max_rate - 1) / max_rate);
    if let Some(due) = due_in_ms {
        if due > interval {
            interval = due + (jitter * interval as f64) as i64;
        }
    }
    interval.min(i64::from(group_ms)) as i32
}

/// A number in [0, 1) spreading the answers of a batch of members (splitmix64 of a counter).
fn jitter() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0x2545_F491_4F6C_DD1D);
    let mut z = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as f64 / 18_446_744_073_709_551_616.0
}

/// The record the network thread writes for a move, for the test comparing it with the
/// coordinator's: (key, value).
#[pyfunction]
#[pyo3(name = "moved_assignment_record")]
pub fn py_moved_assignment_record(
    group_id: &str,
    member_id: &str,
    value: &[u8],
    epoch: i32,
    previous: i32,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let (key, value) = move_record(group_id, member_id, value, epoch, previous)?;
    Some((key?, value?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_rewrites_the_two_epochs_only() {
        let value = [0u8, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 9, 9, 9];
        let (key, moved) = move_record("g", "m", &value, 5, 3).unwrap();
        assert_eq!(key.unwrap(), [0, 8, 0, 1, b'g', 0, 1, b'm']);
        assert_eq!(moved.unwrap(), [0u8, 0, 0, 0, 0, 5, 0, 0, 0, 3, 0, 9, 9, 9]);
        assert!(
            move_record("g", "m", &value[..10], 5, 3).is_none(),
            "not a whole record"
        );
    }

    #[test]
    fn the_interval_rule_bounds_the_rate_and_waits_for_the_batch() {
        // Off, or not below the group's interval: the group's.
        assert_eq!(
            adaptive_interval_ms(5000, 0, 2000, false, true, 10, None, 0.0, false, 10),
            5000
        );
        assert_eq!(
            adaptive_interval_ms(5000, 5000, 2000, false, true, 10, None, 0.0, false, 10),
            5000
        );
        // Stable at the group epoch: the group's, unless settling (then every member counts).
        assert_eq!(
            adaptive_interval_ms(5000, 250, 2000, true, false, 10, None, 0.0, false, 10),
            5000
        );
        assert_eq!(
            adaptive_interval_ms(5000, 250, 2000, true, false, 0, None, 0.0, true, 1000),
            500
        );
        // With work: the short interval, at most max_rate a second, never above the group's.
        assert_eq!(
            adaptive_interval_ms(5000, 250, 2000, false, true, 10, None, 0.0, false, 10),
            250
        );
        assert_eq!(
            adaptive_interval_ms(5000, 250, 2000, false, true, 1001, None, 0.0, false, 1001),
            501
        );
        assert_eq!(
            adaptive_interval_ms(5000, 250, 2000, false, true, 50_000, None, 0.0, false, 50_000),
            5000
        );
        // Behind a batched target: just after it is due, spread by the jitter.
        assert_eq!(
            adaptive_interval_ms(5000, 250, 2000, true, true, 10, Some(800), 0.5, false, 10),
            925
        );
        assert_eq!(
            adaptive_interval_ms(5000, 250, 2000, true, true, 10, Some(100), 0.5, false, 10),
            250
        );
    }

    #[test]
    fn jitter_stays_in_its_range() {
        for _ in 0..10_000 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }

    #[test]
    fn error_answers_carry_no_member() {
        use kafka_protocol::protocol::Decodable;
        let frame = response(1, 7, "m", 0, 0, NOT_COORDINATOR);
        let decoded = ConsumerGroupHeartbeatResponse::decode(&mut frame.slice(9..), 1).unwrap();
        assert_eq!(
            (decoded.error_code, decoded.member_id, decoded.member_epoch),
            (NOT_COORDINATOR, None, 0)
        );
    }
}
