//! The ownership ledger: which member owns each partition, from the client side.
//!
//! A member owns a partition from the answer that assigns it until its next request after the
//! partition was taken away (that request is the revocation acknowledgement: a Java consumer has
//! committed and released the partition by then), or until it leaves or learns it was fenced.
//! Two owners at once is a violation of KIP-848's promise; so is, once the group is quiet, a
//! partition that nobody owns (checked by the caller through `unowned`).
//!
//! Members are slot numbers; topics are small indexes (`TopicIds` interns the 16-byte ids).

use std::collections::HashMap;
use std::time::Instant;

pub type Tp = (u32, i32);
const NOBODY: u32 = u32::MAX;

#[derive(Default)]
pub struct TopicIds {
    index: HashMap<[u8; 16], u32>,
    pub ids: Vec<[u8; 16]>,
}

impl TopicIds {
    pub fn intern(&mut self, id: &[u8; 16]) -> u32 {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        self.ids.push(*id);
        self.index.insert(*id, self.ids.len() as u32 - 1);
        self.ids.len() as u32 - 1
    }
}

pub struct Ledger {
    owner: Vec<Vec<u32>>,
    /// Further owners of partitions owned twice or more (violations only, so usually empty).
    more: HashMap<Tp, Vec<u32>>,
    owned: usize,
    /// The partitions the subscribed topics have: each should be owned once the group is quiet.
    pub total: usize,
    pub violations: u64,
    unowned_seconds: f64,
    at: Instant,
}

impl Ledger {
    pub fn new(total: usize, now: Instant) -> Ledger {
        Ledger {
            owner: Vec::new(),
            more: HashMap::new(),
            owned: 0,
            total,
            violations: 0,
            unowned_seconds: 0.0,
            at: now,
        }
    }

    /// Member `m` owns `tp` from `now`; returns the member that already owned it (a violation).
    pub fn acquire(&mut self, m: u32, (topic, p): Tp, now: Instant) -> Option<u32> {
        self.advance(now);
        let t = topic as usize;
        if self.owner.len() <= t {
            self.owner.resize_with(t + 1, Vec::new);
        }
        let slots = &mut self.owner[t];
        if slots.len() <= p as usize {
            slots.resize(p as usize + 1, NOBODY);
        }
        let first = slots[p as usize];
        if first == NOBODY {
            slots[p as usize] = m;
            self.owned += 1;
            return None;
        }
        if first == m {
            return None;
        }
        let more = self.more.entry((topic, p)).or_default();
        if more.contains(&m) {
            return None;
        }
        more.push(m);
        self.violations += 1;
        Some(first)
    }

    /// Member `m` no longer owns `tp` from `now`.
    pub fn release(&mut self, m: u32, (topic, p): Tp, now: Instant) {
        self.advance(now);
        let Some(slot) = self
            .owner
            .get_mut(topic as usize)
            .and_then(|s| s.get_mut(p as usize))
        else {
            return;
        };
        if *slot == m {
            // Another owner (a violation in progress) becomes the owner.
            match self.more.get_mut(&(topic, p)).and_then(|v| v.pop()) {
                Some(next) => *slot = next,
                None => {
                    *slot = NOBODY;
                    self.owned -= 1;
                }
            }
        } else if let Some(v) = self.more.get_mut(&(topic, p)) {
            v.retain(|&x| x != m);
        }
        if self.more.get(&(topic, p)).is_some_and(|v| v.is_empty()) {
            self.more.remove(&(topic, p));
        }
    }

    /// Partitions of `total` without an owner (not counting partitions beyond it).
    pub fn unowned(&self) -> usize {
        self.total.saturating_sub(self.owned)
    }

    /// Partitions owned by two or more members right now.
    pub fn owned_twice(&self) -> usize {
        self.more.len()
    }

    /// Partition-seconds without an owner up to `now`, since the ledger began.
    pub fn unowned_seconds(&mut self, now: Instant) -> f64 {
        self.advance(now);
        self.unowned_seconds
    }

    /// The number of partitions changes (partitions added to the topics) from `now` on.
    pub fn set_total(&mut self, total: usize, now: Instant) {
        self.advance(now);
        self.total = total;
    }

    fn advance(&mut self, now: Instant) {
        if now > self.at {
            self.unowned_seconds += self.unowned() as f64 * (now - self.at).as_secs_f64();
            self.at = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_partition_handed_over_after_release_is_no_violation() {
        let t0 = Instant::now();
        let mut l = Ledger::new(2, t0);
        assert_eq!(l.acquire(0, (0, 0), t0), None);
        assert_eq!(l.acquire(0, (0, 1), t0), None);
        assert_eq!(l.unowned(), 0);
        l.release(0, (0, 1), t0 + Duration::from_secs(1));
        assert_eq!(l.acquire(1, (0, 1), t0 + Duration::from_secs(3)), None);
        assert_eq!(l.violations, 0);
        // One partition unowned for 2 s.
        assert!((l.unowned_seconds(t0 + Duration::from_secs(5)) - 2.0).abs() < 1e-9);
    }

    #[test]
    fn two_owners_at_once_is_a_violation_until_one_releases() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, t0);
        l.acquire(3, (0, 0), t0);
        assert_eq!(l.acquire(7, (0, 0), t0), Some(3));
        assert_eq!((l.violations, l.owned_twice(), l.unowned()), (1, 1, 0));
        // The first owner lets go: the second is now the only owner, still owned.
        l.release(3, (0, 0), t0);
        assert_eq!((l.owned_twice(), l.unowned()), (0, 0));
        l.release(7, (0, 0), t0);
        assert_eq!(l.unowned(), 1);
        // The same member acquiring again is not a second owner.
        l.acquire(7, (0, 0), t0);
        assert_eq!(l.acquire(7, (0, 0), t0), None);
        assert_eq!(l.violations, 1);
    }

    #[test]
    fn growing_the_topics_makes_new_partitions_unowned() {
        let t0 = Instant::now();
        let mut l = Ledger::new(1, t0);
        l.acquire(0, (0, 0), t0);
        l.set_total(3, t0 + Duration::from_secs(1));
        assert_eq!(l.unowned(), 2);
        assert!((l.unowned_seconds(t0 + Duration::from_secs(2)) - 2.0).abs() < 1e-9);
    }
}
