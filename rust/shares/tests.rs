use super::in_flight::*;

const LIMIT: u16 = 5;

fn acked(
    w: &mut InFlight,
    owner: u32,
    batches: &[(i64, i64, Vec<i8>)],
    limit: u16,
    renew: u64,
) -> Result<Vec<StateBatch>, i16> {
    w.acknowledge(owner, batches, limit, renew)
        .map_err(Refusal::code)
}
const ISOLATE: u16 = 3; // max(2, ceil(5 / 2))

fn window() -> InFlight {
    InFlight::new(0)
}

#[test]
fn acquire_hands_each_available_record_to_one_owner() {
    let mut w = window();
    assert_eq!(
        w.acquire(1, 0, 9, 100, 2000, 1_000, ISOLATE),
        vec![(0, 9, 1)]
    );
    // Nothing left to acquire in that range: another member gets nothing.
    assert_eq!(w.next_fetch_offset(), 10);
    assert_eq!(w.acquire(2, 0, 9, 100, 2000, 1_000, ISOLATE), vec![]);
    assert_eq!(
        w.acquire(2, 10, 14, 3, 2000, 1_000, ISOLATE),
        vec![(10, 12, 1)]
    );
    assert_eq!((w.acquired(), w.in_flight(), w.end()), (13, 13, 13));
}

#[test]
fn the_record_lock_limit_bounds_the_window() {
    let mut w = window();
    assert_eq!(
        w.acquire(1, 0, 99, 100, 10, 1_000, ISOLATE),
        vec![(0, 9, 1)]
    );
    assert_eq!(w.acquire(2, 10, 99, 100, 10, 1_000, ISOLATE), vec![]);
    // Acknowledged records leave the window (the start moves past them): room again.
    assert_eq!(
        acked(&mut w, 1, &[(0, 4, vec![ACK_ACCEPT])], LIMIT, 0),
        Ok(vec![(0, 4, ACKNOWLEDGED, 1)])
    );
    assert_eq!(w.start(), 5);
    assert_eq!(
        w.acquire(2, 10, 99, 100, 10, 1_000, ISOLATE),
        vec![(10, 14, 1)]
    );
}

#[test]
fn acknowledgements_are_all_or_nothing() {
    let mut w = window();
    w.acquire(1, 0, 9, 100, 2000, 1_000, ISOLATE);
    w.acquire(2, 10, 19, 100, 2000, 1_000, ISOLATE);
    // Member 1 may not acknowledge member 2's records: nothing of the request is applied.
    assert_eq!(
        acked(
            &mut w,
            1,
            &[(0, 4, vec![ACK_ACCEPT]), (8, 12, vec![ACK_ACCEPT])],
            LIMIT,
            0
        ),
        Err(INVALID_RECORD_STATE)
    );
    assert_eq!((w.start(), w.acquired()), (0, 20));
    // Past the window: INVALID_REQUEST.
    assert_eq!(
        acked(&mut w, 1, &[(5, 25, vec![ACK_ACCEPT])], LIMIT, 0),
        Err(INVALID_REQUEST)
    );
    // Twice the same record: the second is not acquired any more.
    assert!(w
        .acknowledge(1, &[(0, 0, vec![ACK_ACCEPT])], LIMIT, 0)
        .is_ok());
    assert_eq!(
        acked(&mut w, 1, &[(1, 1, vec![ACK_ACCEPT])], LIMIT, 0),
        Ok(vec![(1, 1, ACKNOWLEDGED, 1)])
    );
    assert_eq!(
        acked(
            &mut w,
            1,
            &[(2, 2, vec![ACK_ACCEPT]), (2, 2, vec![ACK_ACCEPT])],
            LIMIT,
            0
        ),
        Err(INVALID_RECORD_STATE)
    );
    assert_eq!(w.acquired(), 18);
}

#[test]
fn per_offset_types_release_reject_and_gap() {
    let mut w = window();
    w.acquire(1, 0, 3, 100, 2000, 1_000, ISOLATE);
    let changed = w
        .acknowledge(
            1,
            &[(0, 3, vec![ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_GAP])],
            LIMIT,
            0,
        )
        .unwrap();
    assert_eq!(
        changed,
        vec![
            (0, 0, ACKNOWLEDGED, 1),
            (1, 1, AVAILABLE, 1),
            (2, 3, ARCHIVED, 1)
        ]
    );
    // The released record comes back first, on its second delivery; the start waits for it.
    assert_eq!((w.start(), w.next_fetch_offset()), (1, 1));
    assert_eq!(
        w.acquire(2, 1, 3, 100, 2000, 1_000, ISOLATE),
        vec![(1, 1, 2)]
    );
}

#[test]
fn the_delivery_limit_archives_a_poison_record_and_isolates_it_first() {
    let mut w = window();
    let mut deliveries = Vec::new();
    for round in 0..10 {
        let from = w.next_fetch_offset();
        let got = w.acquire(1, from, 2, 100, 2000, 1_000, ISOLATE);
        if got.is_empty() {
            break;
        }
        deliveries.push(got.clone());
        // Record 1 is poison: always released; the rest accepted.
        let mut batches = Vec::new();
        for (first, last, _) in got {
            for offset in first..=last {
                let kind = if offset == 1 { ACK_RELEASE } else { ACK_ACCEPT };
                batches.push((offset, offset, vec![kind]));
            }
        }
        acked(&mut w, 1, &batches, LIMIT, 0).unwrap();
        assert!(round < 9);
    }
    // Deliveries 1 and 2 of record 1 come with their neighbours; from the 3rd it is alone.
    assert_eq!(
        deliveries,
        vec![
            vec![(0, 2, 1)],
            vec![(1, 1, 2)],
            vec![(1, 1, 3)],
            vec![(1, 1, 4)],
            vec![(1, 1, 5)],
        ]
    );
    assert_eq!((w.start(), w.end(), w.acquired()), (3, 3, 0));
}

#[test]
fn expired_locks_and_closed_sessions_release_records() {
    let mut w = window();
    w.acquire(1, 0, 4, 100, 2000, 1_000, ISOLATE);
    w.acquire(2, 5, 9, 100, 2000, 2_000, ISOLATE);
    assert_eq!(w.next_deadline_ms(), 1_000);
    assert_eq!(w.expire(999, LIMIT), vec![]);
    assert_eq!(w.expire(1_000, LIMIT), vec![(0, 4, AVAILABLE, 1)]);
    assert_eq!(w.next_deadline_ms(), 2_000);
    // The released records go to the next fetch, on their second delivery.
    assert_eq!(
        w.acquire(3, 0, 9, 100, 2000, 3_000, ISOLATE),
        vec![(0, 4, 2)]
    );
    assert_eq!(w.release_owner(2, LIMIT), vec![(5, 9, AVAILABLE, 1)]);
    // Member 1's lock expired: it may not acknowledge what member 3 now holds.
    assert_eq!(
        acked(&mut w, 1, &[(0, 0, vec![ACK_ACCEPT])], LIMIT, 0),
        Err(INVALID_RECORD_STATE)
    );
}

#[test]
fn renew_moves_the_lock_and_changes_nothing_else() {
    let mut w = window();
    w.acquire(1, 0, 1, 100, 2000, 1_000, ISOLATE);
    assert_eq!(
        acked(&mut w, 1, &[(0, 1, vec![ACK_RENEW])], LIMIT, 5_000),
        Ok(vec![])
    );
    assert_eq!(w.expire(1_000, LIMIT), vec![]);
    assert_eq!(w.acquired(), 2);
    assert_eq!(w.expire(5_000, LIMIT), vec![(0, 1, AVAILABLE, 1)]);
}

#[test]
fn a_snapshot_restores_the_window_with_acquired_records_available_again() {
    let mut w = window();
    w.acquire(1, 0, 9, 100, 2000, 1_000, ISOLATE);
    acked(
        &mut w,
        1,
        &[
            (0, 2, vec![ACK_ACCEPT]),
            (5, 5, vec![ACK_REJECT]),
            (6, 6, vec![ACK_RELEASE]),
        ],
        LIMIT,
        0,
    )
    .unwrap();
    let snapshot = w.snapshot();
    assert_eq!(
        snapshot,
        vec![
            (3, 4, AVAILABLE, 0),
            (5, 5, ARCHIVED, 1),
            (6, 6, AVAILABLE, 1),
            (7, 9, AVAILABLE, 0)
        ]
    );
    let mut back = InFlight::from_state(w.start(), &snapshot);
    assert_eq!(
        (
            back.start(),
            back.end(),
            back.acquired(),
            back.delivery_complete_count()
        ),
        (3, 10, 0, 1)
    );
    assert_eq!(back.next_fetch_offset(), 3);
    assert_eq!(
        back.acquire(2, 3, 9, 100, 2000, 1_000, ISOLATE),
        vec![(3, 4, 1), (6, 6, 2), (7, 9, 1)]
    );
}

#[test]
fn state_with_gaps_and_a_leading_terminal_run() {
    // Kafka's batches may leave gaps (never delivered) and start with finished records.
    let w = InFlight::from_state(10, &[(10, 12, ACKNOWLEDGED, 1), (15, 15, ARCHIVED, 5)]);
    assert_eq!(
        (w.start(), w.end(), w.delivery_complete_count()),
        (13, 16, 1)
    );
    assert_eq!(
        w.snapshot(),
        vec![(13, 14, AVAILABLE, 0), (15, 15, ARCHIVED, 5)]
    );
}

#[test]
fn the_log_start_passing_the_window_drops_what_is_below() {
    let mut w = window();
    w.acquire(1, 0, 9, 100, 2000, 1_000, ISOLATE);
    w.move_start(5);
    assert_eq!((w.start(), w.acquired(), w.in_flight()), (5, 5, 5));
    w.move_start(20);
    assert_eq!((w.start(), w.end(), w.acquired()), (20, 20, 0));
}

#[test]
fn a_record_costs_16_bytes() {
    let mut w = window();
    w.acquire(1, 0, 1999, 2000, 2000, 1_000, ISOLATE);
    let per_record = (w.memory_bytes() as f64) / 2000.0;
    assert!(per_record <= 17.0, "{per_record}");
}
