//! The in-flight window of one share partition (Kafka's SharePartition cache): from the
//! share-partition start offset (SPSO) to the highest offset ever acquired (SPEO), each record's
//! state, delivery count, owner and lock deadline, 16 bytes a record in one ring buffer.
//!
//! Kafka's rules (reference/share-groups.md §4): AVAILABLE -> ACQUIRED on a fetch (its delivery
//! count + 1), ACQUIRED -> ACKNOWLEDGED / ARCHIVED / AVAILABLE on an acknowledgement, a lock
//! expiry or a session's release; back to AVAILABLE at the delivery limit means ARCHIVED. The SPSO
//! moves past the leading run of terminal records. Every change is reported as coalesced state
//! batches `(first, last, state, count)`, which is what `__share_group_state` stores.

use std::collections::VecDeque;

pub const AVAILABLE: u8 = 0;
pub const ACQUIRED: u8 = 1;
pub const ACKNOWLEDGED: u8 = 2;
pub const ARCHIVED: u8 = 4;

// Acknowledgement types (ShareAcknowledge's AcknowledgeTypes).
pub const ACK_GAP: i8 = 0;
pub const ACK_ACCEPT: i8 = 1;
pub const ACK_RELEASE: i8 = 2;
pub const ACK_REJECT: i8 = 3;
pub const ACK_RENEW: i8 = 4;

// Kafka's error codes for what an acknowledgement can get wrong.
pub const INVALID_REQUEST: i16 = 42;
pub const INVALID_RECORD_STATE: i16 = 121;

/// Why an acknowledgement was refused, with Kafka's code and message for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An offset past what was ever acquired.
    PastAcquired,
    /// A record held by another member.
    NotOwner,
    /// A record not acquired (available, acknowledged, archived, or acknowledged twice).
    NotAcquired,
    /// A batch without acknowledgement types.
    NoTypes,
}

impl Refusal {
    pub fn code(self) -> i16 {
        match self {
            Refusal::PastAcquired | Refusal::NoTypes => INVALID_REQUEST,
            Refusal::NotOwner | Refusal::NotAcquired => INVALID_RECORD_STATE,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refusal::PastAcquired => {
                "Batch record not found. The last offset in request is past acquired records."
            }
            Refusal::NotOwner => "Member is not the owner of batch record",
            Refusal::NotAcquired => {
                "The offset cannot be acknowledged. The offset is not acquired."
            }
            Refusal::NoTypes => "Acknowledge types cannot be empty.",
        }
    }
}

/// (first offset, last offset, state, delivery count): a run of records alike.
pub type StateBatch = (i64, i64, u8, u16);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rec {
    state: u8,
    count: u16,
    owner: u32,
    deadline_ms: u64,
}

const FRESH: Rec = Rec {
    state: AVAILABLE,
    count: 0,
    owner: 0,
    deadline_ms: 0,
};

/// Builds coalesced state batches from records visited in ascending offset order.
#[derive(Default)]
struct Batches(Vec<StateBatch>);

impl Batches {
    fn push(&mut self, offset: i64, state: u8, count: u16) {
        if let Some(last) = self.0.last_mut() {
            if last.1 + 1 == offset && last.2 == state && last.3 == count {
                last.1 = offset;
                return;
            }
        }
        self.0.push((offset, offset, state, count));
    }
}

/// The persisted form of a record: ACQUIRED is never persisted (a restart makes the record
/// available again with the count it had before this delivery).
fn persisted(r: &Rec) -> (u8, u16) {
    if r.state == ACQUIRED {
        (AVAILABLE, r.count.saturating_sub(1))
    } else {
        (r.state, r.count)
    }
}

fn terminal(state: u8) -> bool {
    state == ACKNOWLEDGED || state == ARCHIVED
}

#[derive(Debug)]
pub struct InFlight {
    start: i64,
    recs: VecDeque<Rec>,
    acquired: usize,
    available: usize,
    terminal: usize,
    // No AVAILABLE record lies below this offset (a hint that keeps fetches from rescanning).
    first_available: i64,
    // No lock expires before this (u64::MAX: none held).
    next_deadline_ms: u64,
}

impl InFlight {
    pub fn new(start: i64) -> Self {
        InFlight {
            start,
            recs: VecDeque::new(),
            acquired: 0,
            available: 0,
            terminal: 0,
            first_available: start,
            next_deadline_ms: u64::MAX,
        }
    }

    /// The window as `__share_group_state` kept it: records between the batches (gaps) are
    /// available, never delivered.
    pub fn from_state(start: i64, batches: &[StateBatch]) -> Self {
        let mut f = InFlight::new(start);
        let end = batches.iter().map(|b| b.1 + 1).max().unwrap_or(start);
        for _ in start..end.max(start) {
            f.recs.push_back(FRESH);
        }
        for &(first, last, state, count) in batches {
            for offset in first.max(start)..=last {
                let i = (offset - start) as usize;
                // ARCHIVING (3) resumes as ARCHIVED: corral has no dead-letter queue.
                let state = if state == ACKNOWLEDGED || state == AVAILABLE {
                    state
                } else {
                    ARCHIVED
                };
                f.recs[i] = Rec {
                    state,
                    count,
                    ..FRESH
                };
            }
        }
        f.available = f.recs.iter().filter(|r| r.state == AVAILABLE).count();
        f.terminal = f.recs.len() - f.available;
        f.advance_start();
        f
    }

    pub fn start(&self) -> i64 {
        self.start
    }

    /// One past the highest offset in the window (SPEO + 1).
    pub fn end(&self) -> i64 {
        self.start + self.recs.len() as i64
    }

    pub fn acquired(&self) -> usize {
        self.acquired
    }

    /// Records in a terminal state at or after the start (Kafka's DeliveryCompleteCount).
    pub fn delivery_complete_count(&self) -> usize {
        self.terminal
    }

    /// Records in the window, acknowledged ones not yet passed by the start included (what
    /// `share.partition.max.record.locks` bounds).
    pub fn in_flight(&self) -> usize {
        self.recs.len()
    }

    pub fn next_deadline_ms(&self) -> u64 {
        self.next_deadline_ms
    }

    /// Where the next fetch reads from: the lowest available record, else the end.
    pub fn next_fetch_offset(&mut self) -> i64 {
        if self.available == 0 {
            return self.end();
        }
        let from = (self.first_available.max(self.start) - self.start) as usize;
        let found = (from..self.recs.len()).find(|&i| self.recs[i].state == AVAILABLE);
        let offset = self.start + found.unwrap_or(self.recs.len()) as i64;
        self.first_available = offset;
        offset
    }

    /// Acquires for `owner` the available records in `[first, last]` (offsets the log holds,
    /// read from `next_fetch_offset`), at most `max_records` of them and never more than
    /// `max_locks` in the window. A record delivered `isolate_from` times already is handed out
    /// alone (Kafka isolates poison records as their deliveries run out). Returns the
    /// acquired runs `(first, last, delivery count)`.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        owner: u32,
        first: i64,
        last: i64,
        max_records: usize,
        max_locks: usize,
        deadline_ms: u64,
        isolate_from: u16,
    ) -> Vec<(i64, i64, u16)> {
        let mut out: Vec<(i64, i64, u16)> = Vec::new();
        let mut taken = 0usize;
        let mut offset = first.max(self.start);
        while offset <= last && taken < max_records {
            let i = (offset - self.start) as usize;
            if i >= self.recs.len() && i >= max_locks {
                break;
            }
            while i >= self.recs.len() {
                self.recs.push_back(FRESH);
                self.available += 1;
            }
            let rec = self.recs[i];
            if rec.state != AVAILABLE {
                offset += 1;
                continue;
            }
            let count = rec.count.saturating_add(1);
            // Delivered `isolate_from` times already: its next deliveries are alone.
            let poison = isolate_from > 0 && rec.count >= isolate_from;
            if poison && taken > 0 {
                break; // delivered alone, by the next fetch
            }
            self.recs[i] = Rec {
                state: ACQUIRED,
                count,
                owner,
                deadline_ms,
            };
            self.available -= 1;
            self.acquired += 1;
            taken += 1;
            match out.last_mut() {
                Some(run) if run.1 + 1 == offset && run.2 == count => run.1 = offset,
                _ => out.push((offset, offset, count)),
            }
            offset += 1;
            if poison {
                break;
            }
        }
        if taken > 0 {
            self.next_deadline_ms = self.next_deadline_ms.min(deadline_ms);
            self.first_available = offset;
        }
        out
    }

    /// Applies one request's acknowledgements of one partition, all or nothing: each batch is
    /// `(first, last, types)` with one type for the whole range or one per offset. Offsets below
    /// the start are skipped (Kafka does). Returns the changed state batches, or Kafka's error.
    pub fn acknowledge(
        &mut self,
        owner: u32,
        batches: &[(i64, i64, Vec<i8>)],
        delivery_limit: u16,
        renew_deadline_ms: u64,
    ) -> Result<Vec<StateBatch>, Refusal> {
        // Check everything first: nothing changes unless all of it may. An offset acknowledged
        // twice is not acquired any more the second time.
        let mut checked_to = i64::MIN;
        for (first, last, types) in batches {
            if *last >= self.end() || *first >= self.end() {
                return Err(Refusal::PastAcquired);
            }
            if *first <= checked_to {
                return Err(Refusal::NotAcquired);
            }
            checked_to = *last;
            for offset in (*first).max(self.start)..=*last {
                let rec = &self.recs[(offset - self.start) as usize];
                if rec.state != ACQUIRED {
                    return Err(Refusal::NotAcquired);
                }
                if rec.owner != owner {
                    return Err(Refusal::NotOwner);
                }
            }
            if types.is_empty() {
                return Err(Refusal::NoTypes);
            }
        }
        let mut changed = Batches::default();
        for (first, last, types) in batches {
            for offset in (*first).max(self.start)..=*last {
                let kind = if types.len() == 1 {
                    types[0]
                } else {
                    types[(offset - first) as usize]
                };
                let i = (offset - self.start) as usize;
                if kind == ACK_RENEW {
                    self.recs[i].deadline_ms = renew_deadline_ms;
                    self.next_deadline_ms = self.next_deadline_ms.min(renew_deadline_ms);
                    continue;
                }
                let state = match kind {
                    ACK_ACCEPT => ACKNOWLEDGED,
                    ACK_RELEASE => self.returned_state(i, delivery_limit),
                    ACK_GAP | ACK_REJECT => ARCHIVED,
                    _ => ARCHIVED, // the handlers refuse other types
                };
                self.settle(i, state);
                changed.push(offset, state, self.recs[i].count);
            }
        }
        self.advance_start();
        Ok(changed.0)
    }

    /// The member's acquired records (its session closed, or it left) become available again,
    /// or archived at the delivery limit. Returns the changed state batches.
    pub fn release_owner(&mut self, owner: u32, delivery_limit: u16) -> Vec<StateBatch> {
        self.release_where(delivery_limit, |r| r.owner == owner)
    }

    /// Acquired records whose lock has expired by `now_ms` are released.
    pub fn expire(&mut self, now_ms: u64, delivery_limit: u16) -> Vec<StateBatch> {
        if now_ms < self.next_deadline_ms {
            return Vec::new();
        }
        let changed = self.release_where(delivery_limit, |r| r.deadline_ms <= now_ms);
        self.next_deadline_ms = self
            .recs
            .iter()
            .filter(|r| r.state == ACQUIRED)
            .map(|r| r.deadline_ms)
            .min()
            .unwrap_or(u64::MAX);
        changed
    }

    fn release_where(
        &mut self,
        delivery_limit: u16,
        which: impl Fn(&Rec) -> bool,
    ) -> Vec<StateBatch> {
        let mut changed = Batches::default();
        if self.acquired == 0 {
            return changed.0;
        }
        for i in 0..self.recs.len() {
            let rec = self.recs[i];
            if rec.state == ACQUIRED && which(&rec) {
                let state = self.returned_state(i, delivery_limit);
                self.settle(i, state);
                changed.push(self.start + i as i64, state, rec.count);
            }
        }
        self.advance_start();
        changed.0
    }

    /// Where an acquired record goes when it comes back: available, or archived once its
    /// deliveries reached the limit.
    fn returned_state(&self, i: usize, delivery_limit: u16) -> u8 {
        if self.recs[i].count >= delivery_limit {
            ARCHIVED
        } else {
            AVAILABLE
        }
    }

    /// An acquired record leaves ACQUIRED for `state`.
    fn settle(&mut self, i: usize, state: u8) {
        self.recs[i].state = state;
        self.recs[i].owner = 0;
        self.acquired -= 1;
        if state == AVAILABLE {
            self.available += 1;
            self.first_available = self.first_available.min(self.start + i as i64);
        } else {
            self.terminal += 1;
        }
    }

    /// The start moves past the leading run of terminal records.
    fn advance_start(&mut self) {
        while let Some(rec) = self.recs.front() {
            if !terminal(rec.state) {
                break;
            }
            self.recs.pop_front();
            self.terminal -= 1;
            self.start += 1;
        }
        if self.recs.is_empty() {
            self.recs.shrink_to(64);
        }
        self.first_available = self.first_available.max(self.start);
    }

    /// The log's start passed `offset`: records below it are gone (archived without being
    /// reported, as Kafka does), and an empty window starts there.
    pub fn move_start(&mut self, offset: i64) {
        while self.start < offset {
            match self.recs.pop_front() {
                Some(rec) => {
                    match rec.state {
                        ACQUIRED => self.acquired -= 1,
                        AVAILABLE => self.available -= 1,
                        _ => self.terminal -= 1,
                    }
                    self.start += 1;
                }
                None => self.start = offset,
            }
        }
        self.advance_start();
    }

    /// The whole window as `__share_group_state` stores it (a ShareSnapshot's batches):
    /// acquired records as they were before their delivery.
    pub fn snapshot(&self) -> Vec<StateBatch> {
        let mut out = Batches::default();
        for (i, rec) in self.recs.iter().enumerate() {
            let (state, count) = persisted(rec);
            out.push(self.start + i as i64, state, count);
        }
        out.0
    }

    /// Bytes this window holds (its ring buffer).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.recs.capacity() * std::mem::size_of::<Rec>()
    }
}
