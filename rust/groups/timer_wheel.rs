//! A hashed timing wheel for the coordinators' deadlines (session, rebalance, join, sync).
//!
//! Every deadline is keyed by a caller-chosen u64 (corral interns (group, member, kind) to one).
//! Scheduling a key that is already scheduled moves it: the entry is unlinked from its slot's list
//! and linked into the new one, which is O(1) and allocates nothing, so a heartbeat costs two
//! pointer swaps and a hash lookup. Entries live in a slab (a Vec reused through a free list);
//! each slot of the wheel holds an intrusive doubly linked list of slab indexes. A deadline more
//! than one rotation away stays in its slot for several rounds, since its exact time is checked
//! when the slot is visited.
//!
//! `expired(now)` visits the slots between the last visited tick and now and returns every key
//! whose deadline has passed, in one batch: trio drains them in one wake-up.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

const NIL: u32 = u32::MAX;

/// Keys are already well-spread integers; a multiplicative hash is enough and much faster than SipHash.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
}

type KeyMap = HashMap<u64, u32, BuildHasherDefault<KeyHasher>>;

#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    deadline_ms: u64,
    prev: u32,
    next: u32,
    /// The slot whose list holds this entry; NIL when the entry is on the free list.
    slot: u32,
}

pub struct Wheel {
    tick_ms: u64,
    heads: Vec<u32>,
    entries: Vec<Entry>,
    free_head: u32,
    index: KeyMap,
    /// Every slot up to this tick has been emptied of its due entries; later ticks are pending.
    cursor: u64,
}

impl Wheel {
    pub fn new(tick_ms: u64, slots: usize, now_ms: u64) -> Self {
        let tick_ms = tick_ms.max(1);
        Wheel {
            tick_ms,
            heads: vec![NIL; slots.max(1)],
            entries: Vec::new(),
            free_head: NIL,
            index: KeyMap::default(),
            cursor: (now_ms / tick_ms).saturating_sub(1),
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn deadline(&self, key: u64) -> Option<u64> {
        self.index
            .get(&key)
            .map(|&i| self.entries[i as usize].deadline_ms)
    }

    /// Schedules `key` at `deadline_ms`, replacing its previous deadline if it had one.
    pub fn schedule(&mut self, key: u64, deadline_ms: u64) {
        let idx = match self.index.get(&key) {
            Some(&i) => {
                self.unlink(i);
                i
            }
            None => {
                let i = self.allocate(key);
                self.index.insert(key, i);
                i
            }
        };
        self.entries[idx as usize].deadline_ms = deadline_ms;
        // A deadline at or before the visited tick goes to the next slot to visit.
        let tick = (deadline_ms / self.tick_ms).max(self.cursor + 1);
        self.link(idx, (tick % self.heads.len() as u64) as u32);
    }

    pub fn cancel(&mut self, key: u64) -> bool {
        match self.index.remove(&key) {
            Some(i) => {
                self.unlink(i);
                self.release(i);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the keys whose deadline is at or before `now_ms`.
    pub fn expired(&mut self, now_ms: u64, out: &mut Vec<u64>) {
        let now_tick = now_ms / self.tick_ms;
        if now_tick <= self.cursor {
            return;
        }
        let slots = self.heads.len() as u64;
        // Visiting more than one rotation's worth of ticks would visit slots twice.
        let visits = (now_tick - self.cursor).min(slots);
        for step in 1..=visits {
            let slot = ((self.cursor + step) % slots) as u32;
            let mut i = self.heads[slot as usize];
            while i != NIL {
                let entry = self.entries[i as usize];
                if entry.deadline_ms <= now_ms {
                    self.unlink(i);
                    self.index.remove(&entry.key);
                    self.release(i);
                    out.push(entry.key);
                }
                i = entry.next;
            }
        }
        // The current tick's slot may hold deadlines later in this tick: visit it again next time.
        self.cursor = now_tick - 1;
    }

    fn allocate(&mut self, key: u64) -> u32 {
        let entry = Entry {
            key,
            deadline_ms: 0,
            prev: NIL,
            next: NIL,
            slot: NIL,
        };
        if self.free_head != NIL {
            let i = self.free_head;
            self.free_head = self.entries[i as usize].next;
            self.entries[i as usize] = entry;
            i
        } else {
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        }
    }

    fn release(&mut self, i: u32) {
        let e = &mut self.entries[i as usize];
        e.slot = NIL;
        e.prev = NIL;
        e.next = self.free_head;
        self.free_head = i;
    }

    fn link(&mut self, i: u32, slot: u32) {
        let head = self.heads[slot as usize];
        {
            let e = &mut self.entries[i as usize];
            e.slot = slot;
            e.prev = NIL;
            e.next = head;
        }
        if head != NIL {
            self.entries[head as usize].prev = i;
        }
        self.heads[slot as usize] = i;
    }

    fn unlink(&mut self, i: u32) {
        let Entry {
            prev, next, slot, ..
        } = self.entries[i as usize];
        if prev != NIL {
            self.entries[prev as usize].next = next;
        } else {
            self.heads[slot as usize] = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }
}

/// Milliseconds on CLOCK_MONOTONIC: the one clock of every deadline, read by Python's timer task
/// and by the network thread when a Heartbeat reschedules a session.
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

#[pyfunction(name = "monotonic_ms")]
pub fn py_monotonic_ms() -> u64 {
    monotonic_ms()
}

/// Python face of the wheel. Times are `monotonic_ms()`. The wheel is shared (behind a mutex)
/// with the network thread, which moves session deadlines when it answers a Heartbeat itself.
#[pyclass(frozen, module = "corral._core", name = "TimerWheel")]
pub struct PyTimerWheel {
    pub wheel: Arc<Mutex<Wheel>>,
}

impl PyTimerWheel {
    fn lock(&self) -> std::sync::MutexGuard<'_, Wheel> {
        self.wheel
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl PyTimerWheel {
    #[new]
    #[pyo3(signature = (now_ms, tick_ms = 10, slots = 4096))]
    fn new(now_ms: u64, tick_ms: u64, slots: usize) -> Self {
        PyTimerWheel {
            wheel: Arc::new(Mutex::new(Wheel::new(tick_ms, slots, now_ms))),
        }
    }

    fn schedule(&self, key: u64, deadline_ms: u64) {
        self.lock().schedule(key, deadline_ms)
    }

    fn cancel(&self, key: u64) -> bool {
        self.lock().cancel(key)
    }

    /// The keys due at `now_ms`, removed from the wheel, as one list.
    fn expired(&self, now_ms: u64) -> Vec<u64> {
        let mut due = Vec::new();
        self.lock().expired(now_ms, &mut due);
        due
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }

    /// Whether `key` is scheduled (again: `expired` removes what it returns).
    fn __contains__(&self, key: u64) -> bool {
        self.lock().deadline(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(w: &mut Wheel, now: u64) -> Vec<u64> {
        let mut out = Vec::new();
        w.expired(now, &mut out);
        out.sort();
        out
    }

    #[test]
    fn fires_at_deadline_not_before() {
        let mut w = Wheel::new(10, 64, 0);
        w.schedule(1, 100);
        w.schedule(2, 250);
        assert!(drain(&mut w, 99).is_empty());
        assert_eq!(drain(&mut w, 100), vec![1]);
        assert!(drain(&mut w, 249).is_empty());
        assert_eq!(drain(&mut w, 260), vec![2]);
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn reschedule_moves_the_deadline_and_reuses_the_entry() {
        let mut w = Wheel::new(10, 64, 0);
        w.schedule(7, 100);
        for t in 1..1000u64 {
            w.schedule(7, 100 + t * 10);
        }
        assert_eq!(w.entries.len(), 1);
        assert!(drain(&mut w, 10_000).is_empty());
        assert_eq!(drain(&mut w, 10_090), vec![7]);
    }

    #[test]
    fn cancel_removes_and_frees() {
        let mut w = Wheel::new(10, 8, 0);
        w.schedule(1, 50);
        w.schedule(2, 50);
        w.schedule(3, 50);
        assert!(w.cancel(2));
        assert!(!w.cancel(2));
        assert_eq!(drain(&mut w, 60), vec![1, 3]);
        w.schedule(4, 70);
        assert_eq!(w.entries.len(), 3, "freed entries are reused");
    }

    #[test]
    fn deadlines_beyond_one_rotation_wait_their_round() {
        let mut w = Wheel::new(10, 8, 0); // one rotation = 80 ms
        w.schedule(1, 1000);
        for now in (0..1000).step_by(10) {
            assert!(drain(&mut w, now).is_empty(), "fired early at {now}");
        }
        assert_eq!(drain(&mut w, 1000), vec![1]);
    }

    #[test]
    fn past_deadlines_and_clock_jumps() {
        let mut w = Wheel::new(10, 8, 1000);
        w.schedule(1, 5); // already past
        w.schedule(2, 5000);
        assert_eq!(drain(&mut w, 1010), vec![1]);
        assert_eq!(drain(&mut w, 100_000), vec![2]);
    }

    #[test]
    fn deadline_later_in_the_current_tick_is_not_skipped() {
        let mut w = Wheel::new(10, 8, 0);
        assert!(drain(&mut w, 1003).is_empty());
        w.schedule(1, 1007); // same tick as the last call, a bit later
        assert!(drain(&mut w, 1005).is_empty());
        assert_eq!(drain(&mut w, 1012), vec![1]);
    }

    #[test]
    fn many_keys_expire_in_one_batch() {
        let mut w = Wheel::new(5, 1024, 0);
        for k in 0..10_000u64 {
            w.schedule(k, 1000 + (k % 100));
        }
        let out = drain(&mut w, 1099);
        assert_eq!(out.len(), 10_000);
        assert_eq!(w.len(), 0);
    }
}
