//! The member state machine: what a Java consumer (group.protocol=consumer) sends when, and what
//! it makes of each answer; every change of a member's epoch or partitions goes to the ledger.

use crate::ledger::Tp;
use crate::protocol::{self as p, Answer, TopicId};
use crate::{AfterLeave, Driver, Req, State, Timer, CLIENT_ID};
use std::time::{Duration, Instant};

const NONE: i16 = 0;
const UNKNOWN_MEMBER_ID: i16 = 25;
const FENCED_MEMBER_EPOCH: i16 = 110;
const LEAVE_EPOCH: i32 = -1;
const STATIC_LEAVE_EPOCH: i32 = -2;
/// retry.backoff.ms and retry.backoff.max.ms of the Java client.
const BACKOFF: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);

impl Driver {
    /// A member (a new process, when restarting) joins: epoch 0, every field.
    pub fn start_join(&mut self, i: usize) {
        let v1 = self.version.unwrap_or(self.cfg.max_version) >= 1;
        // KIP-1082: from v1 the client names itself, once per process; on v0 the broker does.
        if self.members[i].member_id.is_empty() || self.members[i].restarting {
            let id = if v1 {
                self.new_member_id()
            } else {
                String::new()
            };
            self.members[i].member_id = id;
        }
        let m = &mut self.members[i];
        m.state = State::Joining;
        m.full = true;
        m.attempt = 0;
        self.send(i, Req::Join);
    }

    /// Sends the member's next request of kind `req`, once its connection is ready.
    pub fn send(&mut self, i: usize, req: Req) {
        if self.members[i].in_flight.is_some() {
            return; // one request in flight per member, as the Java client; the answer decides
        }
        if !self.connection_ready(i) {
            self.members[i].pending = Some(req);
            return;
        }
        let now = Instant::now();
        let version = self.version.expect("the handshake sets the version");
        let c = self.conn_of(i);
        let correlation = self.conns[c].next_correlation();
        debug_assert!(self.conns[c].in_flight.len() < self.cfg.members_per_connection);
        let m = &mut self.members[i];
        let owned = match req {
            Req::Join => Some(Vec::new()),
            Req::Heartbeat if m.full || m.report => {
                Some(group_by_topic(&m.owned, &self.topic_ids.ids))
            }
            _ => None,
        };
        let epoch = match req {
            Req::Join => 0,
            Req::Heartbeat => m.epoch,
            Req::Leave if m.instance_id.is_some() => STATIC_LEAVE_EPOCH,
            Req::Leave => LEAVE_EPOCH,
        };
        let full = (req != Req::Leave && m.full).then_some(p::Full {
            rebalance_timeout_ms: self.cfg.rebalance_timeout_ms,
            topics: &self.cfg.topics,
            server_assignor: self.cfg.server_assignor.as_deref(),
        });
        let frame = p::consumer_group_heartbeat(
            version,
            correlation,
            CLIENT_ID,
            &p::Heartbeat {
                group: &self.cfg.group,
                member_id: &m.member_id,
                epoch,
                instance_id: m.instance_id.as_deref(),
                full,
                owned: owned.as_deref(),
            },
        );
        if owned.is_some() {
            m.report = false;
        }
        // This request acknowledges what was taken away: from now on it is not this member's.
        for tp in std::mem::take(&mut m.revoked) {
            self.ledger.release(i as u32, tp, now);
        }
        self.conns[c].in_flight.add(correlation, i as u32);
        self.stats.max_in_flight = self.stats.max_in_flight.max(self.conns[c].in_flight.len());
        let m = &mut self.members[i];
        m.in_flight = Some(req);
        m.sent_at = now;
        self.stats.requests += 1;
        self.stats.first_request.get_or_insert(now);
        let timeout = self.cfg.request_timeout;
        self.set_timer(i, Timer::Timeout, now + timeout);
        // Before send(): on loopback the answer can be queued before send() returns.
        self.members[i].sent_ns = heartbeat_driver::sys::realtime_ns();
        self.transmit(c, frame);
    }

    /// The heartbeat timer fired.
    pub fn heartbeat_due(&mut self, i: usize) {
        if self.members[i].state != State::In {
            return;
        }
        if let Some((_, _, _, idle)) = &mut self.pace {
            idle.push_back(i as u32);
            return;
        }
        self.send(i, Req::Heartbeat);
    }

    /// After an error answer or a failed connection: the request again, as the state says.
    pub fn retry(&mut self, i: usize) {
        match self.members[i].state {
            State::Joining => self.send(i, Req::Join),
            State::In => self.send(i, Req::Heartbeat),
            State::Leaving => self.send(i, Req::Leave),
            State::Out => {}
        }
    }

    pub fn on_answer(&mut self, i: usize, a: Answer, now: Instant) {
        let m = &mut self.members[i];
        let Some(req) = m.in_flight.take() else {
            return;
        };
        let latency = ((self.received_ns - m.sent_ns).max(0) / 1000).min(u32::MAX as i64) as u32;
        self.cancel_timer(i);
        self.stats.answers += 1;
        match req {
            Req::Join => self.stats.join_us.push(latency),
            Req::Heartbeat => self.stats.heartbeat_us.push(latency),
            Req::Leave => self.stats.leave_us.push(latency),
        }
        if a.error != NONE {
            *self.stats.errors.entry(p::error_name(a.error)).or_default() += 1;
            if self.stats.error_messages.len() < 5 {
                if let Some(text) = a.error_message {
                    self.stats
                        .error_messages
                        .push(format!("{}: {text}", p::error_name(a.error)));
                }
            }
        }
        if req == Req::Leave {
            return self.left(i, now);
        }
        if self.members[i].state == State::Leaving {
            return self.send(i, Req::Leave); // what was in flight when the member began to leave
        }
        match a.error {
            NONE => {}
            FENCED_MEMBER_EPOCH | UNKNOWN_MEMBER_ID => {
                // Everything is lost; rejoin at once with the same id (Java's fenced path).
                self.drop_all(i, now);
                let m = &mut self.members[i];
                m.state = State::Joining;
                m.full = true;
                return self.send(i, Req::Join);
            }
            _ => {
                let m = &mut self.members[i];
                m.full = true;
                m.attempt += 1;
                let attempt = m.attempt;
                let backoff = self.backoff(attempt);
                return self.set_timer(i, Timer::Retry, now + backoff);
            }
        }
        self.accepted(i, &a, now);
    }

    /// An answer without error: the member is in the group at the answer's epoch, with the
    /// answer's partitions if it carries any.
    fn accepted(&mut self, i: usize, a: &Answer, now: Instant) {
        let m = &mut self.members[i];
        m.last_ok = now;
        let mut changed = false;
        if let Some(id) = a
            .member_id
            .filter(|id| !id.is_empty() && *id != m.member_id)
        {
            m.member_id = id.to_string(); // v0: the broker named the member
        }
        m.interval = Duration::from_millis(a.heartbeat_interval_ms.max(0) as u64);
        self.quiet = self.quiet.max(m.interval);
        if m.state != State::In {
            m.state = State::In;
            m.epoch = a.epoch;
            self.in_group += 1;
            *self.epochs.entry(a.epoch).or_default() += 1;
            changed = true;
        } else if a.epoch != m.epoch {
            let (old, id) = (m.epoch, m.member_id.clone());
            m.epoch = a.epoch;
            move_epoch(&mut self.epochs, old, a.epoch);
            changed = true;
            if a.epoch < old {
                self.violation(format!("member {id}: epoch went from {old} to {}", a.epoch));
            }
        }
        if let Some(assignment) = &a.assignment {
            let mut new: Vec<Tp> = Vec::with_capacity(self.members[i].owned.len());
            for (topic_id, partitions) in assignment {
                let t = self.topic_ids.intern(topic_id);
                new.extend(partitions.iter().map(|&p| (t, p)));
            }
            new.sort_unstable();
            new.dedup();
            if new != self.members[i].owned {
                self.reassign(i, new, now);
                changed = true;
            }
        }
        let m = &mut self.members[i];
        m.full = false;
        m.attempt = 0;
        if m.restarting {
            m.restarting = false;
            m.restarted = true;
            self.restarts_in_progress -= 1;
            self.stats.restarts += 1;
        }
        if changed {
            self.change(now);
        }
        let m = &mut self.members[i];
        if m.mark != self.change_mark && now >= self.last_change + self.quiet {
            m.mark = self.change_mark;
            self.confirmed += 1;
        }
        if m.report {
            return self.send(i, Req::Heartbeat); // the acknowledgement goes at once
        }
        if let Some((_, _, _, idle)) = &mut self.pace {
            idle.push_back(i as u32);
            return;
        }
        let at = now + m.interval;
        self.set_timer(i, Timer::Heartbeat, at);
    }

    /// The member's partitions become `new`: added ones are owned from now on, removed ones
    /// until its next request.
    fn reassign(&mut self, i: usize, new: Vec<Tp>, now: Instant) {
        let m = &mut self.members[i];
        let old = std::mem::take(&mut m.owned);
        let mut doubles = Vec::new();
        let (mut a, mut b) = (0, 0);
        while a < old.len() || b < new.len() {
            if b == new.len() || (a < old.len() && old[a] < new[b]) {
                m.revoked.push(old[a]);
                a += 1;
            } else if a == old.len() || new[b] < old[a] {
                let tp = new[b];
                b += 1;
                if let Some(k) = m.revoked.iter().position(|&x| x == tp) {
                    m.revoked.swap_remove(k); // taken back before it was acknowledged: still held
                    continue;
                }
                if let Some(other) = self.ledger.acquire(i as u32, tp, now) {
                    doubles.push((tp, other));
                }
            } else {
                a += 1;
                b += 1;
            }
        }
        let m = &mut self.members[i];
        m.owned = new;
        m.report = true;
        for (tp, other) in doubles {
            let (o, m) = (&self.members[other as usize], &self.members[i]);
            // The other owner unanswered for a session timeout: the broker may have expired it
            // and freed its partitions; it would learn so at its next heartbeat (partitions lost).
            // An overlap then, not a broken promise: counted apart.
            let expired = now.saturating_duration_since(o.last_ok) >= self.cfg.session_timeout;
            let what = format!(
                "partition {}-{} owned by both {} (epoch {}{}) and {} (epoch {})",
                hex(&self.topic_ids.ids[tp.0 as usize]),
                tp.1,
                o.member_id,
                o.epoch,
                if expired {
                    ", unanswered for a session timeout"
                } else {
                    ""
                },
                m.member_id,
                m.epoch
            );
            if expired {
                self.ledger.violations -= 1;
                self.stats.expired_overlaps += 1;
            }
            self.stats.examples.push(what);
        }
    }

    /// Out of the group: nothing owned any more (fenced, or leaving).
    pub fn drop_all(&mut self, i: usize, now: Instant) {
        let m = &mut self.members[i];
        for tp in m.owned.drain(..).chain(m.revoked.drain(..)) {
            self.ledger.release(i as u32, tp, now);
        }
        let m = &mut self.members[i];
        let was_in = m.state == State::In;
        m.report = false;
        m.full = true;
        m.state = State::Out;
        if was_in {
            self.in_group -= 1;
            let e = m.epoch;
            move_epoch(&mut self.epochs, e, i32::MIN);
            self.epochs.remove(&i32::MIN);
            self.change(now);
        }
        self.members[i].epoch = 0;
    }

    /// Leaves the group (epoch -1, or -2 for a static member), then `after`.
    pub fn leave(&mut self, i: usize, after: AfterLeave) {
        let now = Instant::now();
        self.drop_all(i, now);
        let m = &mut self.members[i];
        m.state = State::Leaving;
        m.after_leave = after;
        self.leaves_pending += 1;
        // With a heartbeat in flight, the leave follows its answer (one request at a time).
        if m.in_flight.is_none() {
            self.send(i, Req::Leave);
        }
    }

    /// A restart: leave, close the connection, and a new process joins after `delay`. A shared
    /// connection (--members-per-connection > 1) stays open: the new member joins on it.
    pub fn restart(&mut self, i: usize, delay: Duration) {
        self.members[i].restarting = true;
        self.restarts_in_progress += 1;
        self.leave(i, AfterLeave::Rejoin(delay));
    }

    /// The leave was answered (or failed).
    fn left(&mut self, i: usize, now: Instant) {
        self.leaves_pending -= 1;
        self.members[i].state = State::Out;
        match self.members[i].after_leave {
            AfterLeave::Close => self.release_connection(i),
            AfterLeave::Rejoin(delay) => {
                if self.cfg.members_per_connection == 1 {
                    let c = self.conn_of(i);
                    self.close(c); // a new process, a new connection
                }
                self.set_timer(i, Timer::Rejoin, now + delay)
            }
        }
    }

    /// The request failed at the connection level or timed out (the connection is closed by
    /// then): a leave counts as done, anything else is retried, in full (its answer may have been
    /// lost).
    pub fn lost(&mut self, i: usize, what: &str) {
        let req = self.members[i].in_flight.take();
        let pending = self.members[i].pending.take();
        let Some(req) = req.or(pending) else { return };
        *self.stats.errors.entry(what.to_string()).or_default() += 1;
        let now = Instant::now();
        if req == Req::Leave {
            return self.left(i, now);
        }
        if self.members[i].state == State::Leaving {
            return self.send(i, Req::Leave);
        }
        let m = &mut self.members[i];
        m.full = true;
        m.attempt += 1;
        let backoff = self.backoff(u32::MAX);
        self.set_timer(i, Timer::Retry, now + backoff);
    }

    /// The Java client's ExponentialBackoff: 100 ms doubling up to 1 s, each +-20 % at random.
    /// (Without the jitter, members whose requests a broker keeps dropping retry in lockstep,
    /// and one always behind the others on a shared connection can be starved for good.)
    fn backoff(&mut self, attempt: u32) -> Duration {
        let base = BACKOFF_MAX.min(BACKOFF * 2u32.pow(attempt.clamp(1, 8) - 1));
        base.mul_f64(0.8 + 0.4 * self.uniform())
    }

    /// Some member's epoch or partitions changed: the group is not quiet until every member in
    /// it has been answered again a quiet period later.
    pub fn change(&mut self, now: Instant) {
        self.last_change = now;
        self.change_mark += 1;
        self.confirmed = 0;
    }

    pub fn violation(&mut self, what: String) {
        self.stats.other_violations += 1;
        self.stats.examples.push(what);
    }
}

fn move_epoch(epochs: &mut std::collections::HashMap<i32, usize>, from: i32, to: i32) {
    if let Some(n) = epochs.get_mut(&from) {
        *n -= 1;
        if *n == 0 {
            epochs.remove(&from);
        }
    }
    *epochs.entry(to).or_default() += 1;
}

fn group_by_topic(owned: &[Tp], ids: &[TopicId]) -> Vec<(TopicId, Vec<i32>)> {
    let mut out: Vec<(TopicId, Vec<i32>)> = Vec::new();
    for &(t, p) in owned {
        match out.last_mut() {
            Some((id, ps)) if *id == ids[t as usize] => ps.push(p),
            _ => out.push((ids[t as usize], vec![p])),
        }
    }
    out
}

pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
