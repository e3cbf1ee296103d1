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
//! Lock order: the view, then the wheel. Python takes one at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::timer_wheel::{monotonic_ms, PyTimerWheel, Wheel};

#[derive(Default)]
struct MemberView {
    /// From ConsumerGroupCurrentMemberAssignment.
    epoch: i32,
    stable: bool,
    /// From ConsumerGroupMemberMetadata: a member of the consumer protocol (not a classic member
    /// of a consumer group, whose consumer heartbeat rewrites its metadata).
    consumer: bool,
    /// Its metadata was mirrored (an entry made by its epoch alone is not a member yet).
    known: bool,
    /// A classic member's own session timeout (ClassicMemberMetadata); 0 for a consumer member,
    /// and for a classic one the view cannot answer.
    classic_session_ms: u64,
    instance_id: Option<Box<str>>,
    client_id: Box<str>,
    client_host: Box<str>,
    /// 0 until the coordinator arms the member's session.
    timer_key: u64,
}

#[derive(Default)]
struct GroupView {
    group_epoch: i32,
    assignment_epoch: i32,
    /// A target computation is running, a subscribed topic changed (the next heartbeat
    /// recomputes the metadata hash) or the group is being deleted.
    busy: bool,
    /// Being deleted: commits go to the coordinator (COORDINATOR_NOT_AVAILABLE).
    deleting: bool,
    members: HashMap<Box<str>, MemberView>,
}

impl GroupView {
    fn settled(&self) -> bool {
        !self.busy && self.group_epoch == self.assignment_epoch
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
    answered: AtomicU64,
    classic_answered: AtomicU64,
    /// OffsetCommits the network thread judged it could take (offset_commit.rs).
    takeable: AtomicU64,
}

impl ConsumerHeartbeatView {
    fn with_wheel(wheel: Arc<Mutex<Wheel>>, session_timeout_ms: u64, heartbeat_interval_ms: i32) -> Self {
        ConsumerHeartbeatView {
            groups: Mutex::new(HashMap::new()),
            wheel,
            session_timeout_ms,
            heartbeat_interval_ms,
            timings: Mutex::new(HashMap::new()),
            any_timings: AtomicBool::new(false),
            answered: AtomicU64::new(0),
            classic_answered: AtomicU64::new(0),
            takeable: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Box<str>, GroupView>> {
        self.groups.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The heartbeat interval to answer with, after moving the member's session deadline; None
    /// when the coordinator must answer. The caller has checked that the request changes
    /// nothing (fast: no lock) and that its ids are not blank.
    pub fn answer(&self, hb: &Steady<'_>) -> Option<i32> {
        if hb.member_epoch <= 0 {
            return None;
        }
        let groups = self.lock();
        let group = groups.get(hb.group_id)?;
        if !group.settled() || group.assignment_epoch != hb.member_epoch {
            return None;
        }
        let member = group.members.get(hb.member_id)?;
        if member.epoch != hb.member_epoch || !member.stable || !member.consumer || member.timer_key == 0 {
            return None;
        }
        if hb.instance_id.is_some() && hb.instance_id != member.instance_id.as_deref() {
            return None; // another instance: fenced or unknown
        }
        if *member.client_id != *hb.client_id || *member.client_host != *hb.client_host {
            return None; // the coordinator writes the member's new client id or host
        }
        let (session_timeout_ms, heartbeat_interval_ms) = self.timing(hb.group_id);
        let deadline = monotonic_ms() + session_timeout_ms;
        self.wheel.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).schedule(member.timer_key, deadline);
        drop(groups);
        self.answered.fetch_add(1, Ordering::Relaxed);
        Some(heartbeat_interval_ms)
    }

    /// A classic member's Heartbeat (Kafka's classicGroupHeartbeatToConsumerGroup): NONE, after
    /// moving its session deadline, when the member is a classic one STABLE at the epoch of a
    /// settled group and `generation_id` is that epoch; None when the coordinator must answer
    /// (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID...).
    pub fn classic_answer(&self, group_id: &str, member_id: &str, instance_id: Option<&str>, generation_id: i32) -> Option<i16> {
        if generation_id <= 0 {
            return None;
        }
        let groups = self.lock();
        let group = groups.get(group_id)?;
        // Not settled: a target to compute (a classic heartbeat may start it) or to catch up.
        if !group.settled() || group.assignment_epoch != generation_id {
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
        self.wheel.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).schedule(member.timer_key, deadline);
        drop(groups);
        self.classic_answered.fetch_add(1, Ordering::Relaxed);
        Some(0)
    }

    /// Whether the coordinator accepts an OffsetCommit of `api_version` from this member at this
    /// epoch (Kafka's ConsumerGroup.validateOffsetCommit): true only for a known member at its
    /// current epoch in a group not being deleted (a target computation or a bump in progress
    /// does not change what a member may commit), a consumer-protocol member committing with
    /// v9+. False: the coordinator decides.
    pub fn commit_verdict(&self, group_id: &str, member_id: &str, member_epoch: i32, api_version: i16) -> bool {
        let groups = self.lock();
        let Some(group) = groups.get(group_id) else { return false };
        if group.deleting {
            return false;
        }
        let Some(member) = group.members.get(member_id) else { return false };
        member.known && member.epoch == member_epoch && (!member.consumer || api_version >= 9)
    }

    pub fn count_takeable(&self) {
        self.takeable.fetch_add(1, Ordering::Relaxed);
    }

    /// The group's session timeout and heartbeat interval: its own, else the broker's.
    fn timing(&self, group_id: &str) -> (u64, i32) {
        let defaults = (self.session_timeout_ms, self.heartbeat_interval_ms);
        if !self.any_timings.load(Ordering::Relaxed) {
            return defaults;
        }
        let timings = self.timings.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        timings.get(group_id).copied().unwrap_or(defaults)
    }
}

#[pymethods]
impl ConsumerHeartbeatView {
    /// A view whose session deadlines live in `wheel`: a heartbeat it answers moves the
    /// member's deadline `session_timeout_ms` ahead and tells it to come back in
    /// `heartbeat_interval_ms`.
    #[new]
    fn new(wheel: &PyTimerWheel, session_timeout_ms: u64, heartbeat_interval_ms: i32) -> Self {
        ConsumerHeartbeatView::with_wheel(wheel.wheel.clone(), session_timeout_ms, heartbeat_interval_ms)
    }

    /// The group's epochs; `busy`: its heartbeats go to the coordinator whatever the epochs say;
    /// `deleting`: so do its commits (not given: taken to be `busy`, the safe side).
    #[pyo3(signature = (group_id, group_epoch, assignment_epoch, busy, deleting=None))]
    fn set_group(&self, group_id: &str, group_epoch: i32, assignment_epoch: i32, busy: bool, deleting: Option<bool>) {
        let mut groups = self.lock();
        let group = entry(&mut groups, group_id);
        group.group_epoch = group_epoch;
        group.assignment_epoch = assignment_epoch;
        group.busy = busy;
        group.deleting = deleting.unwrap_or(busy);
    }

    /// The group's own session timeout and heartbeat interval (its settings changed); the
    /// broker's values remove the entry.
    fn set_group_timing(&self, group_id: &str, session_timeout_ms: u64, heartbeat_interval_ms: i32) {
        let mut timings = self.timings.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if (session_timeout_ms, heartbeat_interval_ms) == (self.session_timeout_ms, self.heartbeat_interval_ms) {
            timings.remove(group_id);
        } else {
            timings.insert(group_id.into(), (session_timeout_ms, heartbeat_interval_ms));
        }
        self.any_timings.store(!timings.is_empty(), Ordering::Relaxed);
    }

    fn remove_group(&self, group_id: &str) {
        self.lock().remove(group_id);
    }

    /// A member's metadata (ConsumerGroupMemberMetadata): `consumer` is False for a classic
    /// member of the group, whose own session timeout is `session_timeout_ms`.
    #[pyo3(signature = (group_id, member_id, instance_id, client_id, client_host, consumer, session_timeout_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn set_member(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        client_id: &str,
        client_host: &str,
        consumer: bool,
        session_timeout_ms: Option<u64>,
    ) {
        let mut groups = self.lock();
        let member = member_entry(entry(&mut groups, group_id), member_id);
        member.instance_id = instance_id.map(Box::from);
        member.client_id = client_id.into();
        member.client_host = client_host.into();
        member.consumer = consumer;
        member.known = true;
        member.classic_session_ms = if consumer { 0 } else { session_timeout_ms.unwrap_or(0) };
    }

    /// A member's epoch and whether it is STABLE (ConsumerGroupCurrentMemberAssignment).
    fn set_member_epoch(&self, group_id: &str, member_id: &str, epoch: i32, stable: bool) {
        let mut groups = self.lock();
        let member = member_entry(entry(&mut groups, group_id), member_id);
        member.epoch = epoch;
        member.stable = stable;
    }

    /// The member's session timer key, once the coordinator registered it (a member the view
    /// does not hold is left alone).
    fn set_session_key(&self, group_id: &str, member_id: &str, timer_key: u64) {
        if let Some(member) = self.lock().get_mut(group_id).and_then(|g| g.members.get_mut(member_id)) {
            member.timer_key = timer_key;
        }
    }

    fn remove_member(&self, group_id: &str, member_id: &str) {
        if let Some(group) = self.lock().get_mut(group_id) {
            group.members.remove(member_id);
        }
    }

    /// What the network thread does with a steady-state heartbeat (one that changes nothing):
    /// the heartbeat interval to answer with, the member's session deadline moved; None when
    /// the coordinator answers.
    #[pyo3(name = "answer")]
    fn py_answer(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        member_epoch: i32,
        client_id: &str,
        client_host: &str,
    ) -> Option<i32> {
        self.answer(&Steady { group_id, member_id, instance_id, member_epoch, client_id, client_host })
    }

    /// What the network thread does with a classic member's Heartbeat: NONE (0), its session
    /// deadline moved; None when the coordinator answers.
    #[pyo3(name = "classic_answer")]
    fn py_classic_answer(&self, group_id: &str, member_id: &str, instance_id: Option<&str>, generation_id: i32) -> Option<i16> {
        self.classic_answer(group_id, member_id, instance_id, generation_id)
    }

    /// See `commit_verdict` (for tests: the network thread asks it directly).
    #[pyo3(name = "commit_verdict")]
    fn py_commit_verdict(&self, group_id: &str, member_id: &str, member_epoch: i32, api_version: i16) -> bool {
        self.commit_verdict(group_id, member_id, member_epoch, api_version)
    }

    /// How many ConsumerGroupHeartbeats the view has answered.
    #[getter]
    fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// How many classic members' Heartbeats the view has answered.
    #[getter]
    fn classic_answered(&self) -> u64 {
        self.classic_answered.load(Ordering::Relaxed)
    }

    /// How many OffsetCommits the network thread judged it could take (it still hands them to
    /// Python: docs/offset-commit-short-path.md).
    #[getter]
    fn commits_takeable(&self) -> u64 {
        self.takeable.load(Ordering::Relaxed)
    }

    /// Everything the view holds, for tests: group id -> (group epoch, assignment epoch, busy,
    /// {member id: (epoch, stable, consumer, instance id, client id, client host, timer key)}).
    fn contents<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (group_id, group) in self.lock().iter() {
            let members = PyDict::new(py);
            for (member_id, m) in &group.members {
                members.set_item(
                    &**member_id,
                    (
                        m.epoch,
                        m.stable,
                        m.consumer,
                        m.instance_id.as_deref(),
                        &*m.client_id,
                        &*m.client_host,
                        m.timer_key,
                    ),
                )?;
            }
            out.set_item(&**group_id, (group.group_epoch, group.assignment_epoch, group.busy, members))?;
        }
        Ok(out)
    }
}

fn entry<'a>(groups: &'a mut HashMap<Box<str>, GroupView>, group_id: &str) -> &'a mut GroupView {
    if !groups.contains_key(group_id) {
        groups.insert(group_id.into(), GroupView::default());
    }
    groups.get_mut(group_id).expect("inserted above")
}

fn member_entry<'a>(group: &'a mut GroupView, member_id: &str) -> &'a mut MemberView {
    if !group.members.contains_key(member_id) {
        group.members.insert(member_id.into(), MemberView::default());
    }
    group.members.get_mut(member_id).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> (ConsumerHeartbeatView, Arc<Mutex<Wheel>>) {
        let wheel = Arc::new(Mutex::new(Wheel::new(10, 64, monotonic_ms())));
        (ConsumerHeartbeatView::with_wheel(wheel.clone(), 45_000, 5_000), wheel)
    }

    fn steady<'a>(member_id: &'a str, instance_id: Option<&'a str>, member_epoch: i32) -> Steady<'a> {
        Steady { group_id: "g", member_id, instance_id, member_epoch, client_id: "c", client_host: "/127.0.0.1" }
    }

    /// A settled group at epoch 3 with a STABLE dynamic member m1 (key 7) and a static one s1
    /// (instance i1, key 8).
    fn settled() -> (ConsumerHeartbeatView, Arc<Mutex<Wheel>>) {
        let (view, wheel) = view();
        view.set_group("g", 3, 3, false, None);
        for (member, instance, key) in [("m1", None, 7), ("s1", Some("i1"), 8)] {
            view.set_member("g", member, instance, "c", "/127.0.0.1", true, None);
            view.set_member_epoch("g", member, 3, true);
            view.set_session_key("g", member, key);
        }
        (view, wheel)
    }

    #[test]
    fn answers_stable_members_of_a_settled_group_and_moves_their_deadline() {
        let (view, wheel) = settled();
        assert_eq!(view.answer(&steady("m1", None, 3)), Some(5_000));
        let deadline = wheel.lock().unwrap().deadline(7).expect("session deadline scheduled");
        assert!(deadline >= monotonic_ms() + 44_000);
        assert_eq!(view.answer(&steady("s1", Some("i1"), 3)), Some(5_000));
        assert_eq!(view.answer(&steady("s1", None, 3)), Some(5_000), "no instance id: the member by its id");
        assert_eq!(view.answered(), 3);
    }

    #[test]
    fn a_group_with_its_own_timing_is_answered_with_it() {
        let (view, wheel) = settled();
        view.set_group_timing("g", 50_000, 7_000);
        let before = monotonic_ms();
        assert_eq!(view.answer(&steady("m1", None, 3)), Some(7_000));
        let deadline = wheel.lock().unwrap().deadline(7).unwrap();
        assert!(deadline >= before + 50_000);
        view.set_group_timing("g", 45_000, 5_000); // the broker's again
        assert_eq!(view.answer(&steady("m1", None, 3)), Some(5_000));
    }

    #[test]
    fn anything_but_the_steady_state_goes_to_the_coordinator() {
        let (view, wheel) = settled();
        assert_eq!(view.answer(&steady("m1", None, 2)), None, "an older epoch");
        assert_eq!(view.answer(&steady("m1", None, 4)), None, "a newer epoch");
        assert_eq!(view.answer(&steady("nobody", None, 3)), None);
        assert_eq!(view.answer(&Steady { group_id: "other", ..steady("m1", None, 3) }), None);
        assert_eq!(view.answer(&steady("s1", Some("i2"), 3)), None, "another instance id");
        assert_eq!(view.answer(&steady("m1", Some("i1"), 3)), None, "an instance id the member lacks");
        assert_eq!(view.answer(&Steady { client_id: "d", ..steady("m1", None, 3) }), None, "new client id");
        assert_eq!(view.answer(&Steady { client_host: "/10.0.0.1", ..steady("m1", None, 3) }), None);
        assert!(wheel.lock().unwrap().deadline(7).is_none() && wheel.lock().unwrap().deadline(8).is_none());
        assert_eq!(view.answered(), 0);
    }

    #[test]
    fn the_group_and_member_state_decide() {
        let (view, _) = settled();
        view.set_group("g", 4, 3, false, None);
        assert_eq!(view.answer(&steady("m1", None, 3)), None, "epoch bumped, target not computed");
        view.set_group("g", 4, 4, true, None);
        assert_eq!(view.answer(&steady("m1", None, 4)), None, "busy");
        view.set_group("g", 4, 4, false, None);
        assert_eq!(view.answer(&steady("m1", None, 3)), None, "the member is behind the target");
        view.set_member_epoch("g", "m1", 4, false);
        assert_eq!(view.answer(&steady("m1", None, 4)), None, "reconciling");
        view.set_member_epoch("g", "m1", 4, true);
        assert_eq!(view.answer(&steady("m1", None, 4)), Some(5_000));
        view.set_member("g", "m1", None, "c", "/127.0.0.1", false, None);
        assert_eq!(view.answer(&steady("m1", None, 4)), None, "a classic member");
        view.set_member("g", "m1", None, "c", "/127.0.0.1", true, None);
        view.remove_member("g", "m1");
        assert_eq!(view.answer(&steady("m1", None, 4)), None, "removed");
        view.set_member_epoch("g", "m1", 4, true);
        view.set_member("g", "m1", None, "c", "/127.0.0.1", true, None);
        assert_eq!(view.answer(&steady("m1", None, 4)), None, "back, but its session is not armed yet");
        view.set_session_key("g", "m1", 9);
        assert_eq!(view.answer(&steady("m1", None, 4)), Some(5_000));
        view.remove_group("g");
        assert_eq!(view.answer(&steady("m1", None, 4)), None);
        view.set_session_key("g", "m1", 9);
        assert!(view.lock().is_empty(), "a session key alone does not bring a member back");
    }

    #[test]
    fn epoch_zero_and_below_are_never_answered() {
        let (view, _) = view();
        view.set_group("g", 0, 0, false, None);
        view.set_member("g", "m1", None, "c", "/127.0.0.1", true, None);
        view.set_member_epoch("g", "m1", 0, true);
        view.set_session_key("g", "m1", 7);
        assert_eq!(view.answer(&steady("m1", None, 0)), None);
        view.set_group("g", -1, -1, false, None);
        view.set_member_epoch("g", "m1", -1, true);
        assert_eq!(view.answer(&steady("m1", None, -1)), None);
    }

    /// A settled group at epoch 3 with a STABLE classic member x (session 10 s, key 9) and a
    /// classic static one y (instance iy, key 10).
    fn with_classic() -> (ConsumerHeartbeatView, Arc<Mutex<Wheel>>) {
        let (view, wheel) = settled();
        for (member, instance, key) in [("x", None, 9), ("y", Some("iy"), 10)] {
            view.set_member("g", member, instance, "c", "/127.0.0.1", false, Some(10_000));
            view.set_member_epoch("g", member, 3, true);
            view.set_session_key("g", member, key);
        }
        (view, wheel)
    }

    #[test]
    fn classic_members_of_a_settled_group_are_answered_with_their_own_session() {
        let (view, wheel) = with_classic();
        let before = monotonic_ms();
        assert_eq!(view.classic_answer("g", "x", None, 3), Some(0));
        let deadline = wheel.lock().unwrap().deadline(9).expect("session deadline scheduled");
        assert!(deadline >= before + 10_000 && deadline < before + 45_000, "the member's own timeout");
        assert_eq!(view.classic_answer("g", "y", Some("iy"), 3), Some(0));
        assert_eq!(view.classic_answer("g", "y", None, 3), Some(0));
        assert_eq!((view.classic_answered(), view.answered()), (3, 0));
        // A classic member's ConsumerGroupHeartbeat and a consumer member's Heartbeat are not.
        assert_eq!(view.answer(&steady("x", None, 3)), None);
        assert_eq!(view.classic_answer("g", "m1", None, 3), None);
    }

    #[test]
    fn classic_members_get_the_coordinator_unless_steady() {
        let (view, wheel) = with_classic();
        assert_eq!(view.classic_answer("g", "x", None, 2), None, "a stale generation");
        assert_eq!(view.classic_answer("g", "x", None, 4), None, "a newer generation");
        assert_eq!(view.classic_answer("g", "x", None, 0), None);
        assert_eq!(view.classic_answer("g", "nobody", None, 3), None);
        assert_eq!(view.classic_answer("other", "x", None, 3), None);
        assert_eq!(view.classic_answer("g", "y", Some("iz"), 3), None, "another instance id");
        assert_eq!(view.classic_answer("g", "x", Some("iy"), 3), None, "an instance id it lacks");
        view.set_group("g", 4, 3, false, None);
        assert_eq!(view.classic_answer("g", "x", None, 3), None, "a target to compute");
        view.set_group("g", 4, 4, false, None);
        assert_eq!(view.classic_answer("g", "x", None, 3), None, "behind the target: rejoin");
        view.set_member_epoch("g", "x", 4, false);
        assert_eq!(view.classic_answer("g", "x", None, 4), None, "revoking or waiting");
        view.set_group("g", 4, 4, true, None);
        view.set_member_epoch("g", "x", 4, true);
        assert_eq!(view.classic_answer("g", "x", None, 4), None, "busy");
        view.set_group("g", 4, 4, false, None);
        assert_eq!(view.classic_answer("g", "x", None, 4), Some(0));
        view.set_member("g", "x", None, "c", "/127.0.0.1", true, Some(10_000));
        assert_eq!(view.classic_answer("g", "x", None, 4), None, "upgraded to the consumer protocol");
        view.remove_member("g", "x");
        view.set_member_epoch("g", "x", 4, true);
        assert_eq!(view.classic_answer("g", "x", None, 4), None, "an epoch alone is not a classic member");
        view.set_member("g", "x", None, "c", "/127.0.0.1", false, Some(10_000));
        assert_eq!(view.classic_answer("g", "x", None, 4), None, "its session is not armed yet");
        assert!(wheel.lock().unwrap().deadline(10).is_none(), "y was never answered");
        assert_eq!(view.classic_answered(), 1);
    }

    #[test]
    fn commits_at_the_members_epoch_are_accepted_whatever_the_partitions() {
        let (view, _) = with_classic();
        assert!(view.commit_verdict("g", "m1", 3, 9) && view.commit_verdict("g", "x", 3, 8));
        assert!(!view.commit_verdict("g", "m1", 3, 8), "UNSUPPORTED_VERSION for a consumer member");
        assert!(!view.commit_verdict("g", "m1", 2, 9), "an older epoch: checked per partition");
        assert!(!view.commit_verdict("g", "m1", 4, 9) && !view.commit_verdict("g", "nobody", 3, 9));
        view.set_member_epoch("g", "m1", 4, false);
        assert!(view.commit_verdict("g", "m1", 4, 9), "reconciling members commit too");
        view.set_group("g", 3, 3, true, Some(false));
        assert!(view.commit_verdict("g", "m1", 4, 9), "computing a target changes no commit");
        view.set_group("g", 3, 3, true, None);
        assert!(!view.commit_verdict("g", "m1", 4, 9), "busy, and perhaps being deleted");
        view.set_group("g", 3, 3, true, Some(true));
        assert!(!view.commit_verdict("g", "m1", 4, 9), "being deleted");
        view.set_group("g", 3, 3, false, None);
        view.remove_member("g", "m1");
        view.set_member_epoch("g", "m1", 4, true);
        assert!(!view.commit_verdict("g", "m1", 4, 9), "an epoch alone is not a member");
        view.remove_group("g");
        assert!(!view.commit_verdict("g", "x", 3, 8));
    }
}
