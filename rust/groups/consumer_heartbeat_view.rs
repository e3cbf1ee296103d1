//! What the network thread needs to answer a KIP-848 consumer group's steady-state
//! ConsumerGroupHeartbeat by itself (the consumer-group twin of heartbeat_view.rs).
//!
//! A member of a settled group (group epoch == assignment epoch, no target computation running,
//! no topic change waiting to be looked at) that is STABLE at that epoch and sends an incremental
//! heartbeat with nothing changed gets the same answer every time: its id, its epoch, the
//! heartbeat interval, no assignment, and a fresh session deadline. The coordinator (Python)
//! mirrors here, from `ConsumerGroup.replay`, the little state that decides whether a heartbeat
//! is such a one: per group the two epochs and a busy flag, per member its epoch, whether it is
//! STABLE, its instance id, the client id and host it last came from (a heartbeat from another
//! client updates the member's metadata, which only the coordinator writes) and its session
//! timer key. The network thread looks a heartbeat up and, when every condition holds, moves the
//! member's session deadline in the shared timer wheel and answers; anything else goes to the
//! coordinator, which owns every change and every error answer. No assignment is mirrored: an
//! entry is a few dozen bytes plus the member's strings, whatever the group's size.
//!
//! Classic members of the group (JoinGroup/SyncGroup/Heartbeat clients, reference/kip848.md §5)
//! are answered from the same entries (`classic_answer`): a Heartbeat at the member's epoch from
//! a classic member STABLE at the epoch of a settled group is answered NONE, its session (its
//! own classic session timeout) moved. Anything else (REBALANCE_IN_PROGRESS to rejoin, an
//! unknown member, a stale generation, a fenced instance) is the coordinator's.
//!
//! The same entries say whether an OffsetCommit is one the coordinator accepts
//! (`commit_verdict`): a member at its current epoch, whatever the partitions, since each of its
//! partitions was assigned at that epoch or before (KIP-1251); an older epoch, whose check is per
//! partition, is left to the coordinator, so no assignment needs mirroring
//! (docs/offset-commit-short-path.md).
//!
//! A member STABLE behind the group's target whose target did not change since its epoch
//! (Python says so per member: `movable`, the value of its current-assignment record) is moved
//! to the target's epoch by the network thread (consumer_epoch_moves.rs): the same record with
//! the new epochs, appended by the commit path, answered after its fsync.
//!
//! Lock order: the view, then the wheel. Python takes one at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;

use crate::groups::consumer_epoch_moves::Judged;
use crate::groups::timer_wheel::{monotonic_ms, Wheel};

#[derive(Default)]
pub(crate) struct MemberView {
    /// From ConsumerGroupCurrentMemberAssignment.
    pub(crate) epoch: i32,
    pub(crate) stable: bool,
    /// The value of its ConsumerGroupCurrentMemberAssignment record while the member is STABLE
    /// with nothing pending and exactly its target, every partition's assignment epoch written:
    /// moved to a new target epoch that did not change its target, the record is the same but
    /// for the two epochs (consumer_epoch_moves.rs). None: its next move is Python's.
    pub(crate) movable: Option<Box<[u8]>>,
    /// From ConsumerGroupMemberMetadata: a member of the consumer protocol (not a classic member
    /// of a consumer group, whose consumer heartbeat rewrites its metadata).
    pub(crate) consumer: bool,
    /// Its metadata was mirrored (an entry made by its epoch alone is not a member yet).
    known: bool,
    /// A classic member's own session timeout (ClassicMemberMetadata); 0 for a consumer member,
    /// and for a classic one the view cannot answer.
    classic_session_ms: u64,
    pub(crate) instance_id: Option<Box<str>>,
    pub(crate) client_id: Box<str>,
    pub(crate) client_host: Box<str>,
    /// 0 until the coordinator arms the member's session.
    pub(crate) timer_key: u64,
}

pub(crate) struct GroupView {
    pub(crate) group_epoch: i32,
    pub(crate) assignment_epoch: i32,
    /// A target computation is running, a subscribed topic changed (the next heartbeat
    /// recomputes the metadata hash) or the group is being deleted.
    pub(crate) busy: bool,
    /// Being deleted: commits go to the coordinator (COORDINATOR_NOT_AVAILABLE).
    deleting: bool,
    /// While the group epoch is above the assignment epoch: when (wall ms) the coordinator may
    /// compute the next target (`group.consumer.assignment.interval.ms` batching); from then on
    /// every heartbeat is the coordinator's, which starts it. i64::MIN: at once.
    pub(crate) target_due_ms: i64,
    /// When (wall ms) the network thread last sent a heartbeat to the coordinator because the
    /// next target was due (consumer_epoch_moves.rs: one per `DUE_ASK_MS`).
    pub(crate) due_asked_ms: AtomicI64,
    /// When (wall ms) the current target was computed.
    pub(crate) assignment_ms: i64,
    /// Members move on the network thread only to a target epoch at least this: a topic or
    /// regex resolution changed, so a target computed before may hold partitions a member no
    /// longer subscribes to (the coordinator's reconciliation revokes those).
    pub(crate) moves_from: i32,
    pub(crate) members: HashMap<Box<str>, MemberView>,
}

impl Default for GroupView {
    fn default() -> Self {
        GroupView {
            group_epoch: 0,
            assignment_epoch: 0,
            busy: false,
            deleting: false,
            target_due_ms: i64::MIN,
            due_asked_ms: AtomicI64::new(i64::MIN),
            assignment_ms: 0,
            moves_from: i32::MAX,
            members: HashMap::new(),
        }
    }
}

/// A steady-state heartbeat as the view checks it: the request's identity and the connection's.
pub struct Steady<'a> {
    pub group_id: &'a str,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub member_epoch: i32,
    pub client_id: &'a str,
    pub client_host: &'a str,
}

#[pyclass(frozen, module = "corral._core")]
pub struct ConsumerHeartbeatView {
    groups: Mutex<HashMap<Box<str>, GroupView>>,
    wheel: Arc<Mutex<Wheel>>,
    session_timeout_ms: u64,
    heartbeat_interval_ms: i32,
    /// Groups with their own session timeout or heartbeat interval (kafka-configs --entity-type
    /// groups); `any_timings` spares the lookup while there are none.
    timings: Mutex<HashMap<Box<str>, (u64, i32)>>,
    any_timings: AtomicBool,
    /// corral.consumer.reconciling.heartbeat.interval.ms and .max.rate (answer.py's rule).
    pub(crate) short_ms: AtomicI32,
    pub(crate) max_rate: AtomicI32,
    /// Members are moved to a new target epoch here (corral.group.consumer.epoch.short.path.enable).
    pub(crate) moves_enabled: AtomicBool,
    pub(crate) moved: AtomicU64,
    answered: AtomicU64,
    classic_answered: AtomicU64,
    /// OffsetCommits the network thread judged it could take (offset_commit.rs).
    takeable: AtomicU64,
}

impl ConsumerHeartbeatView {
    fn with_wheel(
        wheel: Arc<Mutex<Wheel>>,
        session_timeout_ms: u64,
        heartbeat_interval_ms: i32,
    ) -> Self {
        ConsumerHeartbeatView {
            groups: Mutex::new(HashMap::new()),
            wheel,
            session_timeout_ms,
            heartbeat_interval_ms,
            timings: Mutex::new(HashMap::new()),
            any_timings: AtomicBool::new(false),
            short_ms: AtomicI32::new(0),
            max_rate: AtomicI32::new(1),
            moves_enabled: AtomicBool::new(false),
            moved: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            classic_answered: AtomicU64::new(0),
            takeable: AtomicU64::new(0),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<Box<str>, GroupView>> {
        self.groups
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The heartbeat interval to answer with, after moving the member's session deadline, when
    /// the member is STABLE at the group's target epoch (`judge`); None when the coordinator
    /// must answer, or the member is one to move (`take_move`). The caller has checked that the
    /// request changes nothing (fast: no lock) and that its ids are not blank.
    pub fn answer(&self, hb: &Steady<'_>) -> Option<i32> {
        let groups = self.lock();
        let Some(Judged::Steady(interval)) = self.judge(&groups, hb, wall_ms(), false) else {
            return None;
        };
        let member = groups.get(hb.group_id)?.members.get(hb.member_id)?;
        self.move_deadline(hb.group_id, member.timer_key);
        drop(groups);
        self.answered.fetch_add(1, Ordering::Relaxed);
        Some(interval)
    }

    /// Moves a member's session deadline one session timeout ahead.
    pub(crate) fn move_deadline(&self, group_id: &str, timer_key: u64) {
        let (session_timeout_ms, _) = self.timing(group_id);
        let deadline = monotonic_ms() + session_timeout_ms;
        self.wheel
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .schedule(timer_key, deadline);
    }

    /// A classic member's Heartbeat (Kafka's classicGroupHeartbeatToConsumerGroup): NONE, after
    /// moving its session deadline, when the member is a classic one STABLE at the epoch of a
    /// settled group and `generation_id` is that epoch; None when the coordinator must answer
    /// (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID...).
    pub fn classic_answer(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Option<i16> {
        if generation_id <= 0 {
            return None;
        }
        let groups = self.lock();
        let group = groups.get(group_id)?;
        // Not settled: a target to compute (a classic heartbeat may start it) or to catch up.
        if group.busy
            || group.group_epoch != group.assignment_epoch
            || group.assignment_epoch != generation_id
        {
            return None;
        }
        let member = group.members.get(member_id)?;
        if member.consumer || member.classic_session_ms == 0 || member.timer_key == 0 {
            return None;
        }
        if member.epoch != generation_id || !member.stable {
            return None; // behind the target, revoking, or waiting for partitions
        }
        if instance_id.is_some() && instance_id != member.instance_id.as_deref() {
            return None; // another instance: fenced or unknown
        }
        let deadline = monotonic_ms() + member.classic_session_ms;
        self.wheel
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .schedule(member.timer_key, deadline);
        drop(groups);
        self.classic_answered.fetch_add(1, Ordering::Relaxed);
        Some(0)
    }

    /// Whether the coordinator accepts an OffsetCommit of `api_version` from this member at this
    /// epoch (Kafka's ConsumerGroup.validateOffsetCommit): true only for a known member at its
    /// current epoch in a group not being deleted (a target computation or a bump in progress
    /// does not change what a member may commit), a consumer-protocol member committing with
    /// v9+. False: the coordinator decides.
    pub fn commit_verdict(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> bool {
        let groups = self.lock();
        let Some(group) = groups.get(group_id) else {
            return false;
        };
        if group.deleting {
            return false;
        }
        let Some(member) = group.members.get(member_id) else {
            return false;
        };
        member.known && member.epoch == member_epoch && (!member.consumer || api_version >= 9)
    }

    pub fn count_takeable(&self) {
        self.takeable.fetch_add(1, Ordering::Relaxed);
    }

    /// The group's session timeout and heartbeat interval: its own, else the broker's.
    pub(crate) fn timing(&self, group_id: &str) -> (u64, i32) {
        let defaults = (self.session_timeout_ms, self.heartbeat_interval_ms);
        if !self.any_timings.load(Ordering::Relaxed) {
            return defaults;
        }
        let timings = self
            .timings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        timings.get(group_id).copied().unwrap_or(defaults)
    }
}

pub(crate) fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

mod python_api;
#[cfg(test)]
mod tests;
