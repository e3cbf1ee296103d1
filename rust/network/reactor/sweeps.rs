//! The timed closes of the network thread: the sweep (at most every MAX_SWEEP) of idle
//! connections and of those stuck in the middle of a request, the delayed close of a failed
//! authentication, and the connections that waited for room in the queued-bytes pool.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{End, Network, Refusal};
use crate::network::limits::{Head, Lane};

/// The sweep for idle connections and stalled partial requests runs at most this far apart.
const MAX_SWEEP: Duration = Duration::from_secs(1);

/// How often to sweep: a quarter of the shortest timeout, at most MAX_SWEEP, at least 10 ms.
pub(super) fn sweep_every(idle: Option<Duration>, partial: Option<Duration>) -> Duration {
    [idle, partial]
        .into_iter()
        .flatten()
        .map(|t| t / 4)
        .fold(MAX_SWEEP, Duration::min)
        .max(Duration::from_millis(10))
}

/// What the sweep looks at of a connection.
struct Activity {
    pool_waiting: bool,
    busy: bool,
    last_active: Instant,
    partial_since: Option<Instant>,
    has_frame: bool,
    buffered: usize,
    head: Head,
}

/// Whether the sweep ends a connection: a request begun `partial` ago and still not whole, or
/// nothing with Python and no bytes in or out for `idle`.
fn verdict(
    idle: Option<Duration>,
    partial: Option<Duration>,
    now: Instant,
    conn: &Activity,
) -> Option<End> {
    if conn.pool_waiting {
        return None; // waiting for us, not for the client
    }
    if let (Some(limit), Some(since)) = (partial, conn.partial_since) {
        if now.duration_since(since) >= limit && !conn.has_frame && conn.buffered > 0 {
            let expected = match conn.head {
                Head::Partial { frame } => format!(" of {frame}"),
                _ => String::new(),
            };
            let reason = format!(
                "request not received within {} ms (corral.socket.partial.request.timeout.ms): {}{expected} bytes arrived",
                limit.as_millis(),
                conn.buffered,
            );
            return Some(End::Refused(Refusal::Slow, reason));
        }
    }
    match idle {
        Some(limit) if !conn.busy && now.duration_since(conn.last_active) >= limit => {
            Some(End::Closed)
        }
        _ => None,
    }
}

/// Connections closed a fixed delay after their answer is written (a failed authentication:
/// Kafka delays the close, so the client reads its answer first, and guessing is slower).
pub(super) struct DelayedCloses {
    delay: Duration,
    /// (when, connection), in time order since the delay is one for all.
    queue: VecDeque<(Instant, u64)>,
}

impl DelayedCloses {
    pub(super) fn new(delay: Duration) -> Self {
        DelayedCloses {
            delay,
            queue: VecDeque::new(),
        }
    }

    /// No delay: close at once.
    pub(super) fn immediate(&self) -> bool {
        self.delay.is_zero()
    }

    pub(super) fn schedule(&mut self, now: Instant, id: u64) {
        self.queue.push_back((now + self.delay, id));
    }

    /// When the next close is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.queue.front().map(|&(at, _)| at)
    }

    /// The next connection due to close by `now`.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<u64> {
        if self.next_due()? > now {
            return None;
        }
        self.queue.pop_front().map(|(_, id)| id)
    }
}

impl Network {
    /// Lets connections waiting for the pool read again, in the order they stopped, while their
    /// lane has room.
    pub(super) fn resume_waiting(&mut self) {
        if !std::mem::take(&mut self.pool_freed) {
            return;
        }
        for lane in [Lane::Small, Lane::Large] {
            while self.pool.has_room(lane) {
                let Some(id) = self.waiting[lane as usize].pop_front() else {
                    break;
                };
                let Some(conn) = self.connections.get_mut(&id) else {
                    continue;
                };
                if !conn.pool_waiting {
                    continue; // it stopped waiting meanwhile (see serve)
                }
                conn.pool_waiting = false;
                // Time spent waiting for the pool is not the client's.
                conn.last_active = self.now;
                if conn.partial_since.is_some() {
                    conn.partial_since = Some(self.now);
                }
                self.read(id);
                self.serve(id);
            }
        }
    }

    /// Closes idle connections and those stuck in the middle of a request.
    pub(super) fn sweep(&mut self) {
        let (idle, partial) = (self.limits.idle, self.limits.partial);
        if idle.is_none() && partial.is_none() {
            return;
        }
        let now = self.now;
        let mut ending = Vec::new();
        for (&id, conn) in &self.connections {
            let activity = Activity {
                pool_waiting: conn.pool_waiting,
                busy: conn.busy,
                last_active: conn.last_active,
                partial_since: conn.partial_since,
                has_frame: conn.frames.has_frame(),
                buffered: conn.frames.buffered(),
                head: conn.frames.head(),
            };
            if let Some(end) = verdict(idle, partial, now, &activity) {
                ending.push((id, end));
            }
        }
        for (id, end) in ending {
            self.end(id, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn quiet(now: Instant) -> Activity {
        Activity {
            pool_waiting: false,
            busy: false,
            last_active: now,
            partial_since: None,
            has_frame: false,
            buffered: 0,
            head: Head::Unknown { buffered: 0 },
        }
    }

    #[test]
    fn sweeps_a_quarter_of_the_shortest_timeout_within_bounds() {
        assert_eq!(sweep_every(None, None), MAX_SWEEP);
        assert_eq!(sweep_every(Some(2000 * MS), Some(800 * MS)), 200 * MS);
        assert_eq!(sweep_every(Some(60_000 * MS), None), MAX_SWEEP);
        assert_eq!(sweep_every(None, Some(MS)), 10 * MS);
    }

    #[test]
    fn idle_connections_close_unless_python_has_their_request() {
        let start = Instant::now();
        let conn = quiet(start);
        let idle = Some(100 * MS);
        assert!(verdict(idle, None, start + 99 * MS, &conn).is_none());
        assert!(matches!(
            verdict(idle, None, start + 100 * MS, &conn),
            Some(End::Closed)
        ));
        assert!(verdict(None, None, start + 100_000 * MS, &conn).is_none());
        let busy = Activity {
            busy: true,
            ..quiet(start)
        };
        assert!(verdict(idle, None, start + 100_000 * MS, &busy).is_none());
        let waiting = Activity {
            pool_waiting: true,
            ..quiet(start)
        };
        assert!(verdict(idle, None, start + 100_000 * MS, &waiting).is_none());
    }

    #[test]
    fn a_stalled_partial_request_is_refused_with_what_arrived() {
        let start = Instant::now();
        let stalled = Activity {
            partial_since: Some(start),
            buffered: 10,
            head: Head::Partial { frame: 104 },
            busy: true,
            ..quiet(start)
        };
        let partial = Some(50 * MS);
        assert!(verdict(None, partial, start + 49 * MS, &stalled).is_none());
        match verdict(None, partial, start + 50 * MS, &stalled) {
            Some(End::Refused(Refusal::Slow, reason)) => assert_eq!(
                reason,
                "request not received within 50 ms (corral.socket.partial.request.timeout.ms): 10 of 104 bytes arrived"
            ),
            _ => panic!("a stalled request is refused"),
        }
        // A whole frame waiting is not stalled, nor is a connection waiting for the pool.
        let whole = Activity {
            has_frame: true,
            ..stalled
        };
        assert!(verdict(None, partial, start + 50 * MS, &whole).is_none());
        let waiting = Activity {
            pool_waiting: true,
            has_frame: false,
            ..whole
        };
        assert!(verdict(None, partial, start + 50 * MS, &waiting).is_none());
    }

    #[test]
    fn delayed_closes_come_due_in_order() {
        let start = Instant::now();
        let mut closes = DelayedCloses::new(100 * MS);
        assert!(!closes.immediate());
        assert_eq!(closes.next_due(), None);
        closes.schedule(start, 7);
        closes.schedule(start + 10 * MS, 8);
        assert_eq!(closes.next_due(), Some(start + 100 * MS));
        assert_eq!(closes.pop_due(start + 99 * MS), None);
        assert_eq!(closes.pop_due(start + 110 * MS), Some(7));
        assert_eq!(closes.pop_due(start + 110 * MS), Some(8));
        assert_eq!(closes.pop_due(start + 110 * MS), None);
        assert!(DelayedCloses::new(Duration::ZERO).immediate());
    }
}
