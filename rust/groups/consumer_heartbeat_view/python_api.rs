//! The view as Python sees it: the coordinator mirrors its groups and members here (from
//! `ConsumerGroup.replay`), tests ask what the network thread would answer, and the counters of
//! what it answered.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use super::{wall_ms, ConsumerHeartbeatView, GroupView, MemberView, Steady};
use crate::groups::consumer_epoch_moves::Judged;
use crate::groups::timer_wheel::PyTimerWheel;

#[pymethods]
impl ConsumerHeartbeatView {
    /// A view whose session deadlines live in `wheel`: a heartbeat it answers moves the
    /// member's deadline `session_timeout_ms` ahead and tells it to come back in
    /// `heartbeat_interval_ms`.
    #[new]
    fn new(wheel: &PyTimerWheel, session_timeout_ms: u64, heartbeat_interval_ms: i32) -> Self {
        ConsumerHeartbeatView::with_wheel(
            wheel.wheel.clone(),
            session_timeout_ms,
            heartbeat_interval_ms,
        )
    }

    /// The group's epochs; `busy`: its heartbeats go to the coordinator whatever the epochs say;
    /// `deleting`: so do its commits (not given: taken to be `busy`, the safe side);
    /// `target_due_ms`: when the next target may be computed (wall ms; None: at once);
    /// `assignment_ms`: when the current one was; `moves_from`: the lowest target epoch members
    /// may be moved to here (None: none).
    #[pyo3(signature = (group_id, group_epoch, assignment_epoch, busy, deleting=None, target_due_ms=None, assignment_ms=0, moves_from=None))]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn set_group(
        &self,
        group_id: &str,
        group_epoch: i32,
        assignment_epoch: i32,
        busy: bool,
        deleting: Option<bool>,
        target_due_ms: Option<i64>,
        assignment_ms: i64,
        moves_from: Option<i32>,
    ) {
        let mut groups = self.lock();
        let group = entry(&mut groups, group_id);
        group.group_epoch = group_epoch;
        group.assignment_epoch = assignment_epoch;
        group.busy = busy;
        group.deleting = deleting.unwrap_or(busy);
        group.target_due_ms = target_due_ms.unwrap_or(i64::MIN);
        group.assignment_ms = assignment_ms;
        group.moves_from = moves_from.unwrap_or(i32::MAX);
    }

    /// The broker's adaptive-interval rule (answer.py) and whether members are moved here.
    pub(super) fn set_rule(&self, short_ms: i32, max_rate: i32, moves: bool) {
        self.short_ms.store(short_ms, Ordering::Relaxed);
        self.max_rate.store(max_rate.max(1), Ordering::Relaxed);
        self.moves_enabled.store(moves, Ordering::Relaxed);
    }

    /// The group's own session timeout and heartbeat interval (its settings changed); the
    /// broker's values remove the entry.
    pub(super) fn set_group_timing(
        &self,
        group_id: &str,
        session_timeout_ms: u64,
        heartbeat_interval_ms: i32,
    ) {
        let mut timings = self
            .timings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if (session_timeout_ms, heartbeat_interval_ms)
            == (self.session_timeout_ms, self.heartbeat_interval_ms)
        {
            timings.remove(group_id);
        } else {
            timings.insert(group_id.into(), (session_timeout_ms, heartbeat_interval_ms));
        }
        self.any_timings
            .store(!timings.is_empty(), Ordering::Relaxed);
    }

    pub(super) fn remove_group(&self, group_id: &str) {
        self.lock().remove(group_id);
    }

    /// A member's metadata (ConsumerGroupMemberMetadata): `consumer` is False for a classic
    /// member of the group, whose own session timeout is `session_timeout_ms`.
    #[pyo3(signature = (group_id, member_id, instance_id, client_id, client_host, consumer, session_timeout_ms=None))]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn set_member(
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
        member.classic_session_ms = if consumer {
            0
        } else {
            session_timeout_ms.unwrap_or(0)
        };
    }

    /// A member's epoch and whether it is STABLE (ConsumerGroupCurrentMemberAssignment), and
    /// the record's value when the member is movable (see `MemberView::movable`).
    #[pyo3(signature = (group_id, member_id, epoch, stable, movable=None))]
    pub(super) fn set_member_epoch(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        stable: bool,
        movable: Option<&[u8]>,
    ) {
        let mut groups = self.lock();
        let member = member_entry(entry(&mut groups, group_id), member_id);
        member.epoch = epoch;
        member.stable = stable;
        member.movable = movable.filter(|value| value.len() > 10).map(Box::from);
    }

    /// The member's target changed (a TargetMember record) and no longer is its assignment:
    /// its next move is the coordinator's.
    pub(super) fn target_changed(&self, group_id: &str, member_id: &str) {
        if let Some(member) = self
            .lock()
            .get_mut(group_id)
            .and_then(|g| g.members.get_mut(member_id))
        {
            member.movable = None;
        }
    }

    /// The member's session timer key, once the coordinator registered it (a member the view
    /// does not hold is left alone).
    pub(super) fn set_session_key(&self, group_id: &str, member_id: &str, timer_key: u64) {
        if let Some(member) = self
            .lock()
            .get_mut(group_id)
            .and_then(|g| g.members.get_mut(member_id))
        {
            member.timer_key = timer_key;
        }
    }

    pub(super) fn remove_member(&self, group_id: &str, member_id: &str) {
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
        self.answer(&Steady {
            group_id,
            member_id,
            instance_id,
            member_epoch,
            client_id,
            client_host,
        })
    }

    /// What the network thread does with a classic member's Heartbeat: NONE (0), its session
    /// deadline moved; None when the coordinator answers.
    #[pyo3(name = "classic_answer")]
    fn py_classic_answer(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Option<i16> {
        self.classic_answer(group_id, member_id, instance_id, generation_id)
    }

    /// What the network thread would do with an incremental heartbeat, for tests: ("steady",
    /// interval), ("move", epoch, previous epoch, interval) or None (the coordinator's).
    #[pyo3(name = "judge")]
    #[allow(clippy::too_many_arguments)]
    fn py_judge<'py>(
        &self,
        py: Python<'py>,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        member_epoch: i32,
        client_id: &str,
        client_host: &str,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let hb = Steady {
            group_id,
            member_id,
            instance_id,
            member_epoch,
            client_id,
            client_host,
        };
        Ok(match self.judge(&self.lock(), &hb, wall_ms(), false) {
            Some(Judged::Steady(interval)) => Some(("steady", interval).into_pyobject(py)?),
            Some(Judged::Move {
                epoch,
                previous,
                interval,
            }) => Some(("move", epoch, previous, interval).into_pyobject(py)?),
            None => None,
        })
    }

    /// The record value the view keeps for a member it may move (tests).
    fn movable<'py>(
        &self,
        py: Python<'py>,
        group_id: &str,
        member_id: &str,
    ) -> Option<Bound<'py, PyBytes>> {
        let groups = self.lock();
        let value = groups
            .get(group_id)?
            .members
            .get(member_id)?
            .movable
            .as_deref()?;
        Some(PyBytes::new(py, value))
    }

    /// See `commit_verdict` (for tests: the network thread asks it directly).
    #[pyo3(name = "commit_verdict")]
    fn py_commit_verdict(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> bool {
        self.commit_verdict(group_id, member_id, member_epoch, api_version)
    }

    /// How many ConsumerGroupHeartbeats the view has answered.
    #[getter]
    pub(super) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// How many members the network thread moved to a new target epoch.
    #[getter]
    fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// How many classic members' Heartbeats the view has answered.
    #[getter]
    pub(super) fn classic_answered(&self) -> u64 {
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
            out.set_item(
                &**group_id,
                (
                    group.group_epoch,
                    group.assignment_epoch,
                    group.busy,
                    members,
                ),
            )?;
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
        group
            .members
            .insert(member_id.into(), MemberView::default());
    }
    group.members.get_mut(member_id).expect("inserted above")
}
