use super::*;

fn view() -> (ConsumerHeartbeatView, Arc<Mutex<Wheel>>) {
    let wheel = Arc::new(Mutex::new(Wheel::new(10, 64, monotonic_ms())));
    (
        ConsumerHeartbeatView::with_wheel(wheel.clone(), 45_000, 5_000),
        wheel,
    )
}

fn steady<'a>(member_id: &'a str, instance_id: Option<&'a str>, member_epoch: i32) -> Steady<'a> {
    Steady {
        group_id: "g",
        member_id,
        instance_id,
        member_epoch,
        client_id: "c",
        client_host: "/127.0.0.1",
    }
}

/// A settled group at epoch 3 with a STABLE dynamic member m1 (key 7) and a static one s1
/// (instance i1, key 8).
fn settled() -> (ConsumerHeartbeatView, Arc<Mutex<Wheel>>) {
    let (view, wheel) = view();
    view.set_group("g", 3, 3, false, None, None, 0, None);
    for (member, instance, key) in [("m1", None, 7), ("s1", Some("i1"), 8)] {
        view.set_member("g", member, instance, "c", "/127.0.0.1", true, None);
        view.set_member_epoch("g", member, 3, true, None);
        view.set_session_key("g", member, key);
    }
    (view, wheel)
}

#[test]
fn answers_stable_members_of_a_settled_group_and_moves_their_deadline() {
    let (view, wheel) = settled();
    assert_eq!(view.answer(&steady("m1", None, 3)), Some(5_000));
    let deadline = wheel
        .lock()
        .unwrap()
        .deadline(7)
        .expect("session deadline scheduled");
    assert!(deadline >= monotonic_ms() + 44_000);
    assert_eq!(view.answer(&steady("s1", Some("i1"), 3)), Some(5_000));
    assert_eq!(
        view.answer(&steady("s1", None, 3)),
        Some(5_000),
        "no instance id: the member by its id"
    );
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
    assert_eq!(
        view.answer(&Steady {
            group_id: "other",
            ..steady("m1", None, 3)
        }),
        None
    );
    assert_eq!(
        view.answer(&steady("s1", Some("i2"), 3)),
        None,
        "another instance id"
    );
    assert_eq!(
        view.answer(&steady("m1", Some("i1"), 3)),
        None,
        "an instance id the member lacks"
    );
    assert_eq!(
        view.answer(&Steady {
            client_id: "d",
            ..steady("m1", None, 3)
        }),
        None,
        "new client id"
    );
    assert_eq!(
        view.answer(&Steady {
            client_host: "/10.0.0.1",
            ..steady("m1", None, 3)
        }),
        None
    );
    assert!(
        wheel.lock().unwrap().deadline(7).is_none() && wheel.lock().unwrap().deadline(8).is_none()
    );
    assert_eq!(view.answered(), 0);
}

#[test]
fn the_group_and_member_state_decide() {
    let (view, _) = settled();
    view.set_group("g", 4, 3, false, None, None, 0, None);
    assert_eq!(
        view.answer(&steady("m1", None, 3)),
        None,
        "epoch bumped, target not computed"
    );
    view.set_group("g", 4, 4, true, None, None, 0, None);
    assert_eq!(view.answer(&steady("m1", None, 4)), None, "busy");
    view.set_group("g", 4, 4, false, None, None, 0, None);
    assert_eq!(
        view.answer(&steady("m1", None, 3)),
        None,
        "the member is behind the target"
    );
    view.set_member_epoch("g", "m1", 4, false, None);
    assert_eq!(view.answer(&steady("m1", None, 4)), None, "reconciling");
    view.set_member_epoch("g", "m1", 4, true, None);
    assert_eq!(view.answer(&steady("m1", None, 4)), Some(5_000));
    view.set_member("g", "m1", None, "c", "/127.0.0.1", false, None);
    assert_eq!(
        view.answer(&steady("m1", None, 4)),
        None,
        "a classic member"
    );
    view.set_member("g", "m1", None, "c", "/127.0.0.1", true, None);
    view.remove_member("g", "m1");
    assert_eq!(view.answer(&steady("m1", None, 4)), None, "removed");
    view.set_member_epoch("g", "m1", 4, true, None);
    view.set_member("g", "m1", None, "c", "/127.0.0.1", true, None);
    assert_eq!(
        view.answer(&steady("m1", None, 4)),
        None,
        "back, but its session is not armed yet"
    );
    view.set_session_key("g", "m1", 9);
    assert_eq!(view.answer(&steady("m1", None, 4)), Some(5_000));
    view.remove_group("g");
    assert_eq!(view.answer(&steady("m1", None, 4)), None);
    view.set_session_key("g", "m1", 9);
    assert!(
        view.lock().is_empty(),
        "a session key alone does not bring a member back"
    );
}

#[test]
fn epoch_zero_and_below_are_never_answered() {
    let (view, _) = view();
    view.set_group("g", 0, 0, false, None, None, 0, None);
    view.set_member("g", "m1", None, "c", "/127.0.0.1", true, None);
    view.set_member_epoch("g", "m1", 0, true, None);
    view.set_session_key("g", "m1", 7);
    assert_eq!(view.answer(&steady("m1", None, 0)), None);
    view.set_group("g", -1, -1, false, None, None, 0, None);
    view.set_member_epoch("g", "m1", -1, true, None);
    assert_eq!(view.answer(&steady("m1", None, -1)), None);
}

/// A settled group at epoch 3 with a STABLE classic member x (session 10 s, key 9) and a
/// classic static one y (instance iy, key 10).
fn with_classic() -> (ConsumerHeartbeatView, Arc<Mutex<Wheel>>) {
    let (view, wheel) = settled();
    for (member, instance, key) in [("x", None, 9), ("y", Some("iy"), 10)] {
        view.set_member(
            "g",
            member,
            instance,
            "c",
            "/127.0.0.1",
            false,
            Some(10_000),
        );
        view.set_member_epoch("g", member, 3, true, None);
        view.set_session_key("g", member, key);
    }
    (view, wheel)
}

#[test]
fn classic_members_of_a_settled_group_are_answered_with_their_own_session() {
    let (view, wheel) = with_classic();
    let before = monotonic_ms();
    assert_eq!(view.classic_answer("g", "x", None, 3), Some(0));
    let deadline = wheel
        .lock()
        .unwrap()
        .deadline(9)
        .expect("session deadline scheduled");
    assert!(
        deadline >= before + 10_000 && deadline < before + 45_000,
        "the member's own timeout"
    );
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
    assert_eq!(
        view.classic_answer("g", "x", None, 2),
        None,
        "a stale generation"
    );
    assert_eq!(
        view.classic_answer("g", "x", None, 4),
        None,
        "a newer generation"
    );
    assert_eq!(view.classic_answer("g", "x", None, 0), None);
    assert_eq!(view.classic_answer("g", "nobody", None, 3), None);
    assert_eq!(view.classic_answer("other", "x", None, 3), None);
    assert_eq!(
        view.classic_answer("g", "y", Some("iz"), 3),
        None,
        "another instance id"
    );
    assert_eq!(
        view.classic_answer("g", "x", Some("iy"), 3),
        None,
        "an instance id it lacks"
    );
    view.set_group("g", 4, 3, false, None, None, 0, None);
    assert_eq!(
        view.classic_answer("g", "x", None, 3),
        None,
        "a target to compute"
    );
    view.set_group("g", 4, 4, false, None, None, 0, None);
    assert_eq!(
        view.classic_answer("g", "x", None, 3),
        None,
        "behind the target: rejoin"
    );
    view.set_member_epoch("g", "x", 4, false, None);
    assert_eq!(
        view.classic_answer("g", "x", None, 4),
        None,
        "revoking or waiting"
    );
    view.set_group("g", 4, 4, true, None, None, 0, None);
    view.set_member_epoch("g", "x", 4, true, None);
    assert_eq!(view.classic_answer("g", "x", None, 4), None, "busy");
    view.set_group("g", 4, 4, false, None, None, 0, None);
    assert_eq!(view.classic_answer("g", "x", None, 4), Some(0));
    view.set_member("g", "x", None, "c", "/127.0.0.1", true, Some(10_000));
    assert_eq!(
        view.classic_answer("g", "x", None, 4),
        None,
        "upgraded to the consumer protocol"
    );
    view.remove_member("g", "x");
    view.set_member_epoch("g", "x", 4, true, None);
    assert_eq!(
        view.classic_answer("g", "x", None, 4),
        None,
        "an epoch alone is not a classic member"
    );
    view.set_member("g", "x", None, "c", "/127.0.0.1", false, Some(10_000));
    assert_eq!(
        view.classic_answer("g", "x", None, 4),
        None,
        "its session is not armed yet"
    );
    assert!(
        wheel.lock().unwrap().deadline(10).is_none(),
        "y was never answered"
    );
    assert_eq!(view.classic_answered(), 1);
}

#[test]
fn commits_at_the_members_epoch_are_accepted_whatever_the_partitions() {
    let (view, _) = with_classic();
    assert!(view.commit_verdict("g", "m1", 3, 9) && view.commit_verdict("g", "x", 3, 8));
    assert!(
        !view.commit_verdict("g", "m1", 3, 8),
        "UNSUPPORTED_VERSION for a consumer member"
    );
    assert!(
        !view.commit_verdict("g", "m1", 2, 9),
        "an older epoch: checked per partition"
    );
    assert!(!view.commit_verdict("g", "m1", 4, 9) && !view.commit_verdict("g", "nobody", 3, 9));
    view.set_member_epoch("g", "m1", 4, false, None);
    assert!(
        view.commit_verdict("g", "m1", 4, 9),
        "reconciling members commit too"
    );
    view.set_group("g", 3, 3, true, Some(false), None, 0, None);
    assert!(
        view.commit_verdict("g", "m1", 4, 9),
        "computing a target changes no commit"
    );
    view.set_group("g", 3, 3, true, None, None, 0, None);
    assert!(
        !view.commit_verdict("g", "m1", 4, 9),
        "busy, and perhaps being deleted"
    );
    view.set_group("g", 3, 3, true, Some(true), None, 0, None);
    assert!(!view.commit_verdict("g", "m1", 4, 9), "being deleted");
    view.set_group("g", 3, 3, false, None, None, 0, None);
    view.remove_member("g", "m1");
    view.set_member_epoch("g", "m1", 4, true, None);
    assert!(
        !view.commit_verdict("g", "m1", 4, 9),
        "an epoch alone is not a member"
    );
    view.remove_group("g");
    assert!(!view.commit_verdict("g", "x", 3, 8));
}

#[test]
fn behind_a_batched_target_members_at_its_epoch_are_answered_until_it_is_due() {
    let (view, _) = settled();
    view.set_rule(250, 2000, true);
    let later = wall_ms() + 60_000;
    view.set_group("g", 4, 3, false, None, Some(later), 0, Some(0));
    let interval = view
        .answer(&steady("m1", None, 3))
        .expect("not due: the network thread's");
    assert!(
        (250..=5_000).contains(&interval),
        "behind: the rule's interval, {interval}"
    );
    view.set_group("g", 4, 3, false, None, Some(wall_ms() - 1), 0, Some(0));
    assert_eq!(
        view.answer(&steady("m1", None, 3)),
        None,
        "due: the coordinator computes it"
    );
    view.set_group("g", 4, 3, false, None, None, 0, Some(0));
    assert_eq!(
        view.answer(&steady("m1", None, 3)),
        None,
        "no batching: due at once"
    );
}

#[test]
fn members_behind_with_their_target_are_moved_and_others_are_not() {
    let (view, _) = settled();
    view.set_rule(250, 2000, true);
    let record = [0u8, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 1, 0];
    view.set_member_epoch("g", "m1", 3, true, Some(&record));
    view.set_group("g", 5, 5, false, None, None, 0, Some(0));
    let hb = steady("m1", None, 3);
    let judged = view.judge(&view.lock(), &hb, wall_ms(), false);
    assert!(
        matches!(
            judged,
            Some(Judged::Move {
                epoch: 5,
                previous: 3,
                ..
            })
        ),
        "{judged:?}"
    );
    assert_eq!(
        view.judge(&view.lock(), &steady("s1", None, 3), wall_ms(), false),
        None,
        "no record: not movable"
    );
    view.set_group("g", 5, 5, false, None, None, 0, Some(6));
    assert_eq!(
        view.judge(&view.lock(), &hb, wall_ms(), false),
        None,
        "a target from before a topic change"
    );
    view.set_group("g", 5, 5, false, None, None, 0, Some(5));
    view.target_changed("g", "m1");
    assert_eq!(
        view.judge(&view.lock(), &hb, wall_ms(), false),
        None,
        "its target changed"
    );
    view.set_member_epoch("g", "m1", 3, true, Some(&record));
    view.set_rule(250, 2000, false);
    assert_eq!(
        view.judge(&view.lock(), &hb, wall_ms(), false),
        None,
        "moves off"
    );
}

#[test]
fn a_due_target_sends_one_heartbeat_to_the_coordinator_at_a_time() {
    let (view, _) = settled();
    view.set_rule(250, 2000, true);
    view.set_group("g", 4, 3, false, None, Some(wall_ms() - 1), 0, Some(0));
    let hb = steady("m1", None, 3);
    let now = wall_ms();
    assert_eq!(
        view.judge(&view.lock(), &hb, now, false),
        None,
        "due: left to the last look"
    );
    assert_eq!(
        view.judge(&view.lock(), &hb, now, true),
        None,
        "this one goes to the coordinator"
    );
    assert!(
        matches!(
            view.judge(&view.lock(), &hb, now, true),
            Some(Judged::Steady(_))
        ),
        "the next ones wait for it"
    );
    assert!(matches!(
        view.judge(&view.lock(), &hb, now + 199, true),
        Some(Judged::Steady(_))
    ));
    assert_eq!(
        view.judge(&view.lock(), &hb, now + 200, true),
        None,
        "then another, should that one not start it"
    );
}
