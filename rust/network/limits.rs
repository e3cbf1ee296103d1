//! The network thread's bookkeeping for its limits, kept free of sockets so it can be tested:
//! the memory pool of `queued.max.request.bytes` and rate-limited reports.
//!
//! The pool works like Kafka's: a connection reserves the declared size of the frame it starts
//! receiving and may finish it even when that takes the pool past its cap (so at most one frame
//! of socket.request.max.bytes overshoots); a connection with nothing reserved does not start
//! reading while the pool is exhausted, and its bytes stay in the kernel's socket buffer.
//! Unlike Kafka, the pool has two lanes: frames up to SMALL_FRAME (heartbeats, commits, metadata)
//! use an eighth of the cap of their own, so large produce requests waiting for memory do not
//! stall group members and admin requests.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Frames up to this size, with their size prefix, use the small lane.
pub const SMALL_FRAME: usize = 64 * 1024;
/// Size prefix of a frame.
const PREFIX: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    Small = 0,
    Large = 1,
}

impl Lane {
    /// The lane of a frame of `bytes`, size prefix included.
    pub fn of(bytes: usize) -> Lane {
        if bytes <= SMALL_FRAME {
            Lane::Small
        } else {
            Lane::Large
        }
    }
}

/// Bytes held per lane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charge([usize; 2]);

impl Charge {
    fn add(&mut self, lane: Lane, bytes: usize) {
        self.0[lane as usize] += bytes;
    }

    pub fn total(&self) -> usize {
        self.0[0] + self.0[1]
    }
}

pub struct Pool {
    /// None: unlimited (queued.max.request.bytes = -1).
    caps: Option<[usize; 2]>,
    used: Charge,
}

impl Pool {
    pub fn new(cap: Option<usize>) -> Pool {
        let caps = cap.map(|cap| {
            let small = (cap / 8).max(1);
            [small, cap.saturating_sub(small).max(1)]
        });
        Pool {
            caps,
            used: Charge::default(),
        }
    }

    pub fn limited(&self) -> bool {
        self.caps.is_some()
    }

    /// Whether a new reservation in `lane` is granted now.
    pub fn has_room(&self, lane: Lane) -> bool {
        match self.caps {
            None => true,
            Some(caps) => self.used.0[lane as usize] < caps[lane as usize],
        }
    }

    /// Bytes held, both lanes (0 when unlimited: nothing is counted then).
    pub fn used(&self) -> usize {
        self.used.total()
    }
}

/// The head of a connection's receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Fewer than 4 bytes: the size is not known yet.
    Unknown { buffered: usize },
    /// A frame of this many bytes (prefix included) has started arriving.
    Partial { frame: usize },
    /// A whole frame (or a size to refuse) is waiting.
    Complete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allow {
    /// Read at most this many bytes.
    Read(usize),
    /// Wait until the lane has room.
    Wait(Lane),
}

/// One connection's part of the pool.
#[derive(Default)]
pub struct Budget {
    /// What the pool counts for this connection.
    charged: Charge,
    /// The head frame's size (prefix included) once reserved: it may be read to its end.
    granted: usize,
    /// The request with Python, prefix included; 0 when none.
    in_flight: usize,
}

impl Budget {
    /// How much the connection may read now. Reserves the head frame when its size is known and
    /// its lane has room. `chunk`: the most one read takes.
    pub fn allowance(&mut self, pool: &Pool, head: Head, chunk: usize) -> Allow {
        if !pool.limited() {
            return Allow::Read(chunk);
        }
        match head {
            Head::Partial { frame } => {
                if self.granted == 0 {
                    let lane = Lane::of(frame);
                    if !pool.has_room(lane) {
                        return Allow::Wait(lane);
                    }
                    self.granted = frame;
                }
                Allow::Read(chunk)
            }
            // Reading may start anything, a large frame included: only while the large lane has
            // room. Otherwise just the size prefix, to learn the frame's lane.
            Head::Unknown { buffered } => {
                if pool.has_room(Lane::Large) {
                    Allow::Read(chunk)
                } else if pool.has_room(Lane::Small) {
                    Allow::Read(PREFIX - buffered)
                } else {
                    Allow::Wait(Lane::Small)
                }
            }
            // Reading ahead of a waiting frame.
            Head::Complete => {
                if pool.has_room(Lane::Large) {
                    Allow::Read(chunk)
                } else {
                    Allow::Wait(Lane::Large)
                }
            }
        }
    }

    #[cfg(test)]
    /// Whether the head frame holds a reservation.
    pub fn granted(&self) -> bool {
        self.granted > 0
    }

    /// The head frame left the buffer; `to_python`: its size when it is now with Python.
    pub fn frame_taken(&mut self, to_python: Option<usize>) {
        self.granted = 0;
        if let Some(bytes) = to_python {
            self.in_flight = bytes + PREFIX;
        }
    }

    /// Python answered the connection's request.
    pub fn answered(&mut self) {
        self.in_flight = 0;
    }

    /// Brings the pool up to date with this connection holding `buffered` bytes; true when it
    /// holds less than before.
    pub fn recharge(&mut self, pool: &mut Pool, buffered: usize) -> bool {
        let mut now = Charge::default();
        if self.in_flight > 0 {
            now.add(Lane::of(self.in_flight), self.in_flight);
        }
        if self.granted > 0 {
            now.add(Lane::of(self.granted), self.granted.max(buffered));
        } else {
            // Bytes read while the pool had room, not reserved yet.
            now.add(Lane::Small, buffered);
        }
        self.set(pool, now)
    }

    /// The connection is gone: everything it held goes back.
    pub fn release(&mut self, pool: &mut Pool) -> bool {
        self.granted = 0;
        self.in_flight = 0;
        self.set(pool, Charge::default())
    }

    fn set(&mut self, pool: &mut Pool, now: Charge) -> bool {
        let before = self.charged;
        if now == before {
            return false;
        }
        for lane in 0..2 {
            pool.used.0[lane] = pool.used.0[lane] - before.0[lane] + now.0[lane];
        }
        self.charged = now;
        now.0[0] < before.0[0] || now.0[1] < before.0[1]
    }
}

/// Counts of events reported at most once per interval: the first at once, the ones after it
/// together when the interval has passed.
pub struct Reports<K: Ord> {
    pending: BTreeMap<K, u64>,
    last: Option<Instant>,
    interval: Duration,
}

impl<K: Ord + Copy> Reports<K> {
    pub fn new(interval: Duration) -> Self {
        Reports {
            pending: BTreeMap::new(),
            last: None,
            interval,
        }
    }

    pub fn note(&mut self, key: K) {
        *self.pending.entry(key).or_insert(0) += 1;
    }

    /// Kinds counted since the last report.
    pub fn kinds(&self) -> usize {
        self.pending.len()
    }

    pub fn counts(&self, key: &K) -> bool {
        self.pending.contains_key(key)
    }

    pub fn pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The counts to report now, if it is time.
    pub fn take_due(&mut self, now: Instant) -> Option<Vec<(K, u64)>> {
        if self.pending.is_empty()
            || self
                .last
                .is_some_and(|last| now.duration_since(last) < self.interval)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.pending).into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: usize = 65536;
    const MB: usize = 1 << 20;

    #[test]
    fn unlimited_pool_always_reads_a_chunk() {
        let pool = Pool::new(None);
        let mut b = Budget::default();
        assert_eq!(
            b.allowance(&pool, Head::Partial { frame: 100 * MB }, CHUNK),
            Allow::Read(CHUNK)
        );
        assert!(!b.granted());
    }

    #[test]
    fn one_large_frame_may_overshoot_then_others_wait() {
        let mut pool = Pool::new(Some(32 * MB));
        let (mut a, mut b) = (Budget::default(), Budget::default());
        assert_eq!(
            a.allowance(&pool, Head::Unknown { buffered: 0 }, CHUNK),
            Allow::Read(CHUNK)
        );
        a.recharge(&mut pool, CHUNK);
        assert_eq!(
            a.allowance(&pool, Head::Partial { frame: 100 * MB }, CHUNK),
            Allow::Read(CHUNK)
        );
        a.recharge(&mut pool, 90 * MB);
        assert_eq!(pool.used(), 100 * MB, "the whole declared size is reserved");
        // B may learn its head's size, then waits.
        assert_eq!(
            b.allowance(&pool, Head::Unknown { buffered: 1 }, CHUNK),
            Allow::Read(3)
        );
        b.recharge(&mut pool, 4);
        assert_eq!(
            b.allowance(&pool, Head::Partial { frame: 100 * MB }, CHUNK),
            Allow::Wait(Lane::Large)
        );
        // A granted frame is finished even over the cap.
        assert_eq!(
            a.allowance(&pool, Head::Partial { frame: 100 * MB }, CHUNK),
            Allow::Read(CHUNK)
        );
        // A small request still gets through, on its own lane.
        let mut c = Budget::default();
        assert_eq!(
            c.allowance(&pool, Head::Unknown { buffered: 0 }, CHUNK),
            Allow::Read(4)
        );
        c.recharge(&mut pool, 4);
        assert_eq!(
            c.allowance(&pool, Head::Partial { frame: 50 }, CHUNK),
            Allow::Read(CHUNK)
        );
        c.recharge(&mut pool, 50);
        c.frame_taken(None);
        assert!(
            c.recharge(&mut pool, 0),
            "a frame the core answered frees its bytes"
        );
        // A goes away: B gets its reservation.
        assert!(a.release(&mut pool));
        assert_eq!(pool.used(), 4);
        assert_eq!(
            b.allowance(&pool, Head::Partial { frame: 100 * MB }, CHUNK),
            Allow::Read(CHUNK)
        );
        b.recharge(&mut pool, 5);
        assert_eq!(pool.used(), 100 * MB);
    }

    #[test]
    fn frames_with_python_stay_counted_until_answered() {
        let mut pool = Pool::new(Some(8 * MB));
        let mut a = Budget::default();
        assert_eq!(
            a.allowance(&pool, Head::Partial { frame: 2 * MB + 4 }, CHUNK),
            Allow::Read(CHUNK)
        );
        a.recharge(&mut pool, 2 * MB + 4);
        a.frame_taken(Some(2 * MB));
        assert!(!a.recharge(&mut pool, 0));
        assert_eq!(pool.used(), 2 * MB + 4);
        a.answered();
        assert!(a.recharge(&mut pool, 0));
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn exhausted_lanes_make_readers_wait() {
        let mut pool = Pool::new(Some(8 * 1024));
        let mut hog = Budget::default();
        assert_eq!(
            hog.allowance(&pool, Head::Partial { frame: 2000 }, CHUNK),
            Allow::Read(CHUNK)
        );
        hog.recharge(&mut pool, 1500);
        assert!(
            !pool.has_room(Lane::Small),
            "2000 bytes fill the 1 KiB small lane"
        );
        let mut b = Budget::default();
        assert_eq!(
            b.allowance(&pool, Head::Partial { frame: 100 }, CHUNK),
            Allow::Wait(Lane::Small)
        );
        assert_eq!(
            b.allowance(&pool, Head::Complete, CHUNK),
            Allow::Read(CHUNK),
            "the large lane is free"
        );
        let mut big = Budget::default();
        assert_eq!(
            big.allowance(&pool, Head::Partial { frame: 1 << 20 }, CHUNK),
            Allow::Read(CHUNK)
        );
        big.recharge(&mut pool, 10);
        assert_eq!(
            b.allowance(&pool, Head::Unknown { buffered: 0 }, CHUNK),
            Allow::Wait(Lane::Small)
        );
        assert_eq!(
            b.allowance(&pool, Head::Complete, CHUNK),
            Allow::Wait(Lane::Large)
        );
    }

    #[test]
    fn reports_first_at_once_then_once_per_interval() {
        let t0 = Instant::now();
        let mut r = Reports::new(Duration::from_secs(10));
        assert_eq!(r.take_due(t0), None);
        r.note("a");
        assert_eq!(r.take_due(t0), Some(vec![("a", 1)]));
        for _ in 0..5 {
            r.note("a");
        }
        r.note("b");
        assert_eq!(r.take_due(t0 + Duration::from_secs(9)), None);
        assert!(r.pending());
        assert_eq!(
            r.take_due(t0 + Duration::from_secs(10)),
            Some(vec![("a", 5), ("b", 1)])
        );
        assert!(!r.pending());
    }
}
