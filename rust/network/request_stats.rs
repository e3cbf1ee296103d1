//! Request counters of the network thread, read by Python when /metrics is scraped.
//!
//! The network thread sees every request: it counts each one (per API key and version), times
//! it from when the thread takes its frame to when its answer is queued for writing (answered
//! by the core or by Python), and counts the error codes of the answers it gives itself (the
//! short paths, ApiVersions, the Produce v0-2 refusal). Python counts the errors of its own
//! answers (metrics.py).
//!
//! There is one writer, the network thread, so a counter is a relaxed load and store, not a
//! locked read-modify-write: the hot path pays no lock and no contended instruction. A reader
//! may see a bucket updated before the count; scrapes are approximate at that scale anyway.
//! Cells are allocated the first time their (key, version) is seen.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

const MAX_KEY: usize = 128;
const MAX_VERSION: usize = 32;
/// Error codes -1..=ERROR_SLOTS-2 are counted; anything else is counted as -1.
const ERROR_SLOTS: usize = 160;
/// Upper bounds of the latency histogram's buckets, in microseconds (the last one is +Inf).
pub const BUCKETS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

struct Cell {
    requests: AtomicU64,
    /// Per bucket (not cumulative); the last one is over the last bound.
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
    errors: [AtomicU64; ERROR_SLOTS],
}

impl Cell {
    fn new() -> Cell {
        Cell {
            requests: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Adds `n` to a counter only the network thread writes.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// One (key, version)'s counters, as `Reactor.request_stats()` returns them: key, version,
/// requests, the latency buckets (not cumulative), the latency sum in seconds, and the error
/// codes the core answered with their counts.
pub type Snapshot = (i16, i16, u64, Vec<u64>, f64, Vec<(i16, u64)>);

pub struct RequestStats {
    cells: Box<[OnceLock<Box<Cell>>]>,
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats {
            cells: (0..MAX_KEY * MAX_VERSION)
                .map(|_| OnceLock::new())
                .collect(),
        }
    }
}

impl RequestStats {
    /// The cell of a routed request: its key and version are the table's, so in range; anything
    /// else is not counted.
    fn cell(&self, api_key: i16, api_version: i16) -> Option<&Cell> {
        let (key, version) = (
            usize::try_from(api_key).ok()?,
            usize::try_from(api_version).ok()?,
        );
        if key >= MAX_KEY || version >= MAX_VERSION {
            return None;
        }
        Some(self.cells[key * MAX_VERSION + version].get_or_init(|| Box::new(Cell::new())))
    }

    /// A request the network thread took.
    pub fn received(&self, api_key: i16, api_version: i16) {
        if let Some(cell) = self.cell(api_key, api_version) {
            bump(&cell.requests, 1);
        }
    }

    /// A request answered `elapsed` after it was taken; `error`: the code the core answered
    /// with (None when Python answered: it counts its own errors).
    pub fn answered(&self, api_key: i16, api_version: i16, elapsed: Duration, error: Option<i16>) {
        let Some(cell) = self.cell(api_key, api_version) else {
            return;
        };
        let us = elapsed.as_micros().min(u64::MAX as u128) as u64;
        let bucket = BUCKETS_US
            .iter()
            .position(|&bound| us <= bound)
            .unwrap_or(BUCKETS_US.len());
        bump(&cell.buckets[bucket], 1);
        bump(&cell.sum_us, us);
        if let Some(code) = error.filter(|&code| code != 0) {
            let slot = usize::try_from(code as i32 + 1)
                .ok()
                .filter(|&slot| slot < ERROR_SLOTS)
                .unwrap_or(0);
            bump(&cell.errors[slot], 1);
        }
    }

    pub fn snapshot(&self) -> Vec<Snapshot> {
        let mut out = Vec::new();
        for (i, cell) in self.cells.iter().enumerate() {
            let Some(cell) = cell.get() else { continue };
            let errors = (cell.errors.iter().enumerate())
                .filter_map(|(slot, n)| match n.load(Ordering::Relaxed) {
                    0 => None,
                    n => Some((slot as i16 - 1, n)),
                })
                .collect();
            out.push((
                (i / MAX_VERSION) as i16,
                (i % MAX_VERSION) as i16,
                cell.requests.load(Ordering::Relaxed),
                cell.buckets
                    .iter()
                    .map(|b| b.load(Ordering::Relaxed))
                    .collect(),
                cell.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
                errors,
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_buckets_and_errors_per_key_and_version() {
        let stats = RequestStats::default();
        stats.received(12, 4);
        stats.received(12, 4);
        stats.received(18, 3);
        stats.answered(12, 4, Duration::from_micros(40), Some(0));
        stats.answered(12, 4, Duration::from_millis(3), Some(27));
        stats.answered(18, 3, Duration::from_secs(60), Some(-1));
        stats.received(500, 0); // out of range: ignored
        let snapshot = stats.snapshot();
        assert_eq!(snapshot.len(), 2);
        let (key, version, requests, buckets, sum, errors) = &snapshot[0];
        assert_eq!((*key, *version, *requests), (12, 4, 2));
        assert_eq!(buckets[0], 1);
        assert_eq!(buckets[6], 1, "3 ms is in the 5 ms bucket");
        assert!((sum - 0.00304).abs() < 1e-9);
        assert_eq!(errors, &vec![(27, 1)]);
        let (_, _, _, buckets, _, errors) = &snapshot[1];
        assert_eq!(buckets[BUCKETS_US.len()], 1, "over the last bound");
        assert_eq!(errors, &vec![(-1, 1)]);
    }
}
