//! Per-member timers and the random numbers that spread members' requests.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// One-shot timers of members on one heap: (when, member, token). A member keeps the token of its
/// newest timer; an entry whose token is not that one is stale (re-set or cancelled), so that
/// re-setting never searches the heap.
pub struct Timers<M: Ord + Copy>(BinaryHeap<Reverse<(Instant, M, u64)>>);

impl<M: Ord + Copy> Default for Timers<M> {
    fn default() -> Self {
        Timers(BinaryHeap::new())
    }
}

impl<M: Ord + Copy> Timers<M> {
    pub fn push(&mut self, at: Instant, member: M, token: u64) {
        self.0.push(Reverse((at, member, token)));
    }

    /// When the earliest timer (stale or not) is due.
    pub fn next_at(&self) -> Option<Instant> {
        self.0.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The next timer due at `now`, taken off the heap: (member, token).
    pub fn pop_due(&mut self, now: Instant) -> Option<(M, u64)> {
        let &Reverse((at, member, token)) = self.0.peek()?;
        if at > now {
            return None;
        }
        self.0.pop();
        Some((member, token))
    }
}

/// xorshift64*, seeded from the clocks and the process id (runs differ, no dependency needed).
pub struct Rng(u64);

impl Rng {
    pub fn from_clock() -> Rng {
        let seed = Instant::now().elapsed().as_nanos() as u64
            ^ (std::process::id() as u64) << 32
            ^ crate::sys::realtime_ns() as u64;
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
