//! Storage faults made on purpose (corral's fault API, docs/faults.md): a full disk, failing or
//! slow fsyncs, without a small disk or a broken one. They act where the real ones would show:
//! a full disk refuses an append before anything is written (ENOSPC), a failing fsync fails a
//! whole flush pass before any file is synced (EIO), so the store's own failure handling runs as
//! it does for real faults, and nothing acknowledged can be lost: an append is acknowledged only
//! after a pass that succeeded, and a failed pass leaves its partitions waiting for the next one.
//!
//! Off by default; each check is one relaxed atomic load, so the store pays nothing for them.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct StorageFaults {
    disk_full: AtomicBool,
    /// Flush passes still to fail.
    failing_fsyncs: AtomicU32,
    /// Added to every flush pass.
    fsync_delay_ms: AtomicU64,
    /// Appends and passes a fault refused or delayed (for /metrics).
    fired: AtomicU64,
}

impl StorageFaults {
    pub(crate) fn set(&self, disk_full: bool, failing_fsyncs: u32, fsync_delay_ms: u64) {
        self.disk_full.store(disk_full, Relaxed);
        self.failing_fsyncs.store(failing_fsyncs, Relaxed);
        self.fsync_delay_ms.store(fsync_delay_ms, Relaxed);
    }

    /// (disk full, flush passes still to fail, delay of each pass in ms, faults fired).
    pub(crate) fn get(&self) -> (bool, u32, u64, u64) {
        (
            self.disk_full.load(Relaxed),
            self.failing_fsyncs.load(Relaxed),
            self.fsync_delay_ms.load(Relaxed),
            self.fired.load(Relaxed),
        )
    }

    /// Before an append writes anything.
    pub(crate) fn before_append(&self) -> io::Result<()> {
        if self.disk_full.load(Relaxed) {
            self.fired.fetch_add(1, Relaxed);
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    /// Before a flush pass syncs anything: its delay, then its failure if one is due.
    pub(crate) fn before_fsync(&self) -> io::Result<()> {
        let delay = self.fsync_delay_ms.load(Relaxed);
        if delay > 0 {
            self.fired.fetch_add(1, Relaxed);
            std::thread::sleep(Duration::from_millis(delay));
        }
        let take_one = |n: u32| n.checked_sub(1);
        if self
            .failing_fsyncs
            .fetch_update(Relaxed, Relaxed, take_one)
            .is_ok()
        {
            self.fired.fetch_add(1, Relaxed);
            return Err(io::Error::other("fsync failed (injected storage fault)"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default() {
        let faults = StorageFaults::default();
        assert!(faults.before_append().is_ok());
        assert!(faults.before_fsync().is_ok());
        assert_eq!(faults.get(), (false, 0, 0, 0));
    }

    #[test]
    fn disk_full_refuses_appends_until_cleared() {
        let faults = StorageFaults::default();
        faults.set(true, 0, 0);
        let e = faults.before_append().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(
            faults.before_fsync().is_ok(),
            "a full disk still syncs what it holds"
        );
        faults.set(false, 0, 0);
        assert!(faults.before_append().is_ok());
        assert_eq!(faults.get().3, 1);
    }

    #[test]
    fn failing_fsyncs_fail_that_many_passes() {
        let faults = StorageFaults::default();
        faults.set(false, 2, 0);
        assert!(faults.before_fsync().is_err());
        assert!(faults.before_fsync().is_err());
        assert!(faults.before_fsync().is_ok());
        assert_eq!(faults.get(), (false, 0, 0, 2));
    }

    #[test]
    fn a_delay_slows_each_pass() {
        let faults = StorageFaults::default();
        faults.set(false, 0, 20);
        let started = std::time::Instant::now();
        assert!(faults.before_fsync().is_ok());
        assert!(started.elapsed() >= Duration::from_millis(20));
    }
}
