//! What the network thread needs to answer a classic group's steady-state Heartbeat by itself.
//!
//! Heartbeat is the request a large group sends most (10,000 members at a 3 s interval is 3,300/s)
//! and its answer is a pure function of little state: is the member in the group, does its
//! generation match, is the group rebalancing. The coordinator (Python) keeps that state here as
//! it changes it; the network thread looks a Heartbeat up and, when the lookup gives the answer,
//! moves the member's session deadline in the shared timer wheel and replies without Python.
//! Anything else (an unknown group or member, a stale generation, a fenced instance, an empty
//! group) goes to the coordinator, which owns every error answer: the view only ever says what
//! the coordinator would say for the success cases.
//!
//! The same entries say whether an OffsetCommit from a member is one the coordinator accepts
//! (`commit_verdict`, Kafka's ClassicGroup.validateOffsetCommit for a known member): a step
//! towards committing without Python (docs/offset-commit-short-path.md).
//!
//! Lock order: the view, then the wheel. Python takes one at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;

use crate::groups::timer_wheel::{monotonic_ms, PyTimerWheel, Wheel};

/// The group's answer to a member of the current generation: NONE (Stable, CompletingRebalance)
/// or REBALANCE_IN_PROGRESS (PreparingRebalance). None: the coordinator answers (Empty).
type GroupAnswer = Option<i16>;

struct MemberView {
    group_instance_id: Option<String>,
    timer_key: u64,
    session_timeout_ms: u64,
}

#[derive(Default)]
struct GroupView {
    generation_id: i32,
    answer: GroupAnswer,
    /// Members of the generation may commit offsets (Stable, PreparingRebalance; not
    /// CompletingRebalance, where they have no assignment yet).
    commits: bool,
    members: HashMap<String, MemberView>,
}

pub struct Views {
    groups: HashMap<String, GroupView>,
}

#[pyclass(frozen, module = "corral._core")]
pub struct HeartbeatView {
    views: Mutex<Views>,
    wheel: Arc<Mutex<Wheel>>,
    /// OffsetCommits the network thread judged it could take (offset_commit.rs).
    takeable: AtomicU64,
}

impl HeartbeatView {
    fn lock(&self) -> MutexGuard<'_, Views> {
        self.views
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The error code to answer with, after moving the member's session deadline; None when the
    /// coordinator must answer.
    pub fn answer(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Option<i16> {
        let views = self.lock();
        let group = views.groups.get(group_id)?;
        let code = group.answer?;
        if group.generation_id != generation_id {
            return None;
        }
        let member = group.members.get(member_id)?;
        if instance_id.is_some() && instance_id != member.group_instance_id.as_deref() {
            return None;
        }
        let deadline = monotonic_ms() + member.session_timeout_ms;
        self.wheel
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .schedule(member.timer_key, deadline);
        Some(code)
    }

    /// Whether the coordinator accepts an OffsetCommit from this member at this generation
    /// (true only when sure: a member of the current generation of a group whose members may
    /// commit, its instance id its own). False: the coordinator decides.
    pub fn commit_verdict(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> bool {
        let views = self.lock();
        let Some(group) = views.groups.get(group_id) else {
            return false;
        };
        if !group.commits || generation_id < 0 || group.generation_id != generation_id {
            return false;
        }
        let Some(member) = group.members.get(member_id) else {
            return false;
        };
        instance_id.is_none() || instance_id == member.group_instance_id.as_deref()
    }

    pub fn count_takeable(&self) {
        self.takeable.fetch_add(1, Ordering::Relaxed);
    }
}

#[pymethods]
impl HeartbeatView {
    /// A view whose session deadlines live in `wheel`.
    #[new]
    fn new(wheel: &PyTimerWheel) -> Self {
        HeartbeatView {
            views: Mutex::new(Views {
                groups: HashMap::new(),
            }),
            wheel: wheel.wheel.clone(),
            takeable: AtomicU64::new(0),
        }
    }

    /// The group's generation and its answer to members of that generation (None: the
    /// coordinator answers every Heartbeat of the group); `commits`: they may commit offsets.
    #[pyo3(signature = (group_id, generation_id, answer, commits=false))]
    fn set_group(&self, group_id: &str, generation_id: i32, answer: Option<i16>, commits: bool) {
        let mut views = self.lock();
        let group = views.groups.entry(group_id.to_owned()).or_default();
        group.generation_id = generation_id;
        group.answer = answer;
        group.commits = commits;
    }

    /// See `commit_verdict` (for tests: the network thread asks it directly).
    #[pyo3(name = "commit_verdict")]
    fn py_commit_verdict(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> bool {
        self.commit_verdict(group_id, member_id, instance_id, generation_id)
    }

    fn remove_group(&self, group_id: &str) {
        self.lock().groups.remove(group_id);
    }

    /// How many OffsetCommits the network thread judged it could take (it still hands them to
    /// Python: docs/offset-commit-short-path.md).
    #[getter]
    fn commits_takeable(&self) -> u64 {
        self.takeable.load(Ordering::Relaxed)
    }

    #[pyo3(signature = (group_id, member_id, group_instance_id, timer_key, session_timeout_ms))]
    fn set_member(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<String>,
        timer_key: u64,
        session_timeout_ms: u64,
    ) {
        let mut views = self.lock();
        let group = views.groups.entry(group_id.to_owned()).or_default();
        group.members.insert(
            member_id.to_owned(),
            MemberView {
                group_instance_id,
                timer_key,
                session_timeout_ms,
            },
        );
    }

    fn remove_member(&self, group_id: &str, member_id: &str) {
        if let Some(group) = self.lock().groups.get_mut(group_id) {
            group.members.remove(member_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> (HeartbeatView, Arc<Mutex<Wheel>>) {
        let wheel = Arc::new(Mutex::new(Wheel::new(10, 64, monotonic_ms())));
        (
            HeartbeatView {
                views: Mutex::new(Views {
                    groups: HashMap::new(),
                }),
                wheel: wheel.clone(),
                takeable: AtomicU64::new(0),
            },
            wheel,
        )
    }

    #[test]
    fn answers_only_members_of_the_current_generation_and_moves_their_deadline() {
        let (view, wheel) = view();
        view.set_group("g", 3, Some(0), false);
        view.set_member("g", "m1", None, 7, 45_000);
        view.set_member("g", "s1", Some("i1".into()), 8, 10_000);
        assert_eq!(view.answer("g", "m1", None, 3), Some(0));
        let deadline = wheel
            .lock()
            .unwrap()
            .deadline(7)
            .expect("session deadline scheduled");
        assert!(deadline >= monotonic_ms() + 44_000);
        assert_eq!(
            view.answer("g", "m1", None, 2),
            None,
            "stale generation: the coordinator answers"
        );
        assert_eq!(view.answer("g", "nobody", None, 3), None);
        assert_eq!(view.answer("other", "m1", None, 3), None);
        assert_eq!(view.answer("g", "s1", Some("i1"), 3), Some(0));
        assert_eq!(
            view.answer("g", "s1", Some("i2"), 3),
            None,
            "another instance id: fenced or unknown"
        );
        assert_eq!(view.answer("g", "s1", None, 3), Some(0));
    }

    #[test]
    fn group_state_decides_the_answer() {
        let (view, _) = view();
        view.set_member("g", "m1", None, 7, 45_000);
        view.set_group("g", 1, Some(27), true);
        assert_eq!(view.answer("g", "m1", None, 1), Some(27));
        view.set_group("g", 1, None, false);
        assert_eq!(view.answer("g", "m1", None, 1), None);
        view.set_group("g", 2, Some(0), true);
        view.remove_member("g", "m1");
        assert_eq!(view.answer("g", "m1", None, 2), None);
        view.set_member("g", "m1", None, 7, 45_000);
        view.remove_group("g");
        assert_eq!(view.answer("g", "m1", None, 2), None);
        assert!(
            view.lock().groups.is_empty(),
            "the group and its members are gone"
        );
    }

    #[test]
    fn commits_are_accepted_only_from_members_of_the_generation_of_a_committing_group() {
        let (view, wheel) = view();
        view.set_group("g", 3, Some(0), true);
        view.set_member("g", "m1", None, 7, 45_000);
        view.set_member("g", "s1", Some("i1".into()), 8, 10_000);
        assert!(view.commit_verdict("g", "m1", None, 3));
        assert!(
            view.commit_verdict("g", "s1", Some("i1"), 3)
                && view.commit_verdict("g", "s1", None, 3)
        );
        assert!(
            wheel.lock().unwrap().deadline(7).is_none(),
            "a commit is no heartbeat"
        );
        assert!(
            !view.commit_verdict("g", "m1", None, 2),
            "ILLEGAL_GENERATION is the coordinator's"
        );
        assert!(!view.commit_verdict("g", "m1", None, -1));
        assert!(!view.commit_verdict("g", "nobody", None, 3));
        assert!(
            !view.commit_verdict("g", "s1", Some("i2"), 3),
            "fenced or unknown instance"
        );
        assert!(!view.commit_verdict("g", "m1", Some("i1"), 3));
        assert!(!view.commit_verdict("other", "m1", None, 3));
        view.set_group("g", 4, Some(0), false); // CompletingRebalance: REBALANCE_IN_PROGRESS
        assert!(!view.commit_verdict("g", "m1", None, 4));
        view.set_group("g", 4, Some(27), true); // PreparingRebalance: commits still accepted
        assert!(view.commit_verdict("g", "m1", None, 4));
        view.remove_group("g");
        assert!(!view.commit_verdict("g", "m1", None, 4));
    }
}
