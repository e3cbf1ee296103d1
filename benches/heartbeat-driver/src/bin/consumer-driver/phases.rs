//! Phases: each command runs until its end condition and then prints one JSON line.

use crate::{AfterLeave, Driver, State};
use heartbeat_driver::sys::cpu_seconds;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::time::{Duration, Instant};

pub enum Phase {
    Idle,
    Connect {
        deadline: Instant,
    },
    Join {
        deadline: Instant,
        sent_at: Option<Instant>,
    },
    Steady {
        end: Instant,
    },
    Churn {
        end: Instant,
        rate: f64,
        delay: Duration,
        started: u64,
        settle_deadline: Duration,
        unowned_at_end: Option<f64>,
    },
    Roll {
        queue: VecDeque<usize>,
        concurrency: usize,
        deadline: Instant,
        rolled_at: Option<Instant>,
    },
    WaitOwned {
        deadline: Instant,
    },
    Leave {
        deadline: Instant,
    },
}

/// What one phase saw.
pub struct Stats {
    pub name: String,
    pub started: Instant,
    pub cpu: heartbeat_driver::sys::CpuTimes,
    pub heartbeat_us: Vec<u32>,
    pub join_us: Vec<u32>,
    pub leave_us: Vec<u32>,
    pub errors: BTreeMap<String, u64>,
    pub error_messages: Vec<String>,
    pub requests: u64,
    pub answers: u64,
    pub restarts: u64,
    pub first_request: Option<Instant>,
    pub other_violations: u64,
    pub examples: Vec<String>,
    pub ownership_violations_before: u64,
    pub unowned_seconds_before: f64,
    pub quiet_unowned: usize,
    /// Two owners at once where the first had not been answered for a session timeout.
    pub expired_overlaps: u64,
    pub extra: Vec<(&'static str, String)>,
    /// The most requests in flight at once on one connection.
    pub max_in_flight: usize,
}

impl Stats {
    pub fn new(now: Instant) -> Stats {
        Stats {
            name: String::new(),
            started: now,
            cpu: cpu_seconds(),
            heartbeat_us: Vec::new(),
            join_us: Vec::new(),
            leave_us: Vec::new(),
            errors: BTreeMap::new(),
            error_messages: Vec::new(),
            requests: 0,
            answers: 0,
            restarts: 0,
            first_request: None,
            other_violations: 0,
            examples: Vec::new(),
            ownership_violations_before: 0,
            unowned_seconds_before: 0.0,
            quiet_unowned: 0,
            expired_overlaps: 0,
            extra: Vec::new(),
            max_in_flight: 0,
        }
    }
}

impl Driver {
    /// Every member in the group at one epoch, every partition owned exactly once, and nothing
    /// changed while each member was answered again a quiet period later.
    pub fn converged(&self) -> bool {
        self.in_group == self.cfg.members
            && self.restarts_in_progress == 0
            && self.epochs.len() == 1
            && self.ledger.unowned() == 0
            && self.ledger.owned_twice() == 0
            && self.confirmed >= self.in_group
    }

    /// Quiet, yet some partitions have no owner: once per change, a violation (except while
    /// waiting for partitions just added, which the broker may take a while to see).
    fn check_quiet_unowned(&mut self) {
        let quiet = self.in_group == self.cfg.members
            && self.epochs.len() == 1
            && self.confirmed >= self.in_group;
        let unowned = self.ledger.unowned();
        if !quiet || unowned == 0 || self.stats.quiet_unowned == self.change_mark as usize + 1 {
            return;
        }
        self.stats.quiet_unowned = self.change_mark as usize + 1;
        if !matches!(self.phase, Phase::WaitOwned { .. }) {
            let epoch = self.epochs.keys().next().copied().unwrap_or(0);
            self.violation(format!(
                "quiet at epoch {epoch} with {unowned} partitions owned by no member"
            ));
        }
    }

    pub fn tick(&mut self, now: Instant) {
        self.check_quiet_unowned();
        let mut done: Option<(bool, Vec<(&'static str, String)>)> = None;
        let members = self.cfg.members;
        if let Phase::Idle = self.phase {
            match self.commands.pop_front() {
                Some(command) => self.start(&command, now),
                None if !self.stdin_open => self.quit = true,
                None => {}
            }
            return;
        }
        // The phase is taken out while it runs, so that its arms may use the whole driver.
        let mut phase = std::mem::replace(&mut self.phase, Phase::Idle);
        match &mut phase {
            Phase::Idle => {}
            Phase::Connect { deadline } => {
                if self.ready_conns == self.conns.len() {
                    done = Some((
                        true,
                        vec![(
                            "seconds",
                            format!("{:.3}", (now - self.stats.started).as_secs_f64()),
                        )],
                    ));
                } else if now >= *deadline {
                    done = Some((false, vec![]));
                }
            }
            Phase::Join { deadline, sent_at } => {
                if sent_at.is_none() && self.ready_conns == self.conns.len() {
                    // Connected: now the storm, every member's join at once.
                    *sent_at = Some(now);
                    let connect = (now - self.stats.started).as_secs_f64();
                    self.stats.examples.clear();
                    for i in 0..members {
                        self.start_join(i);
                    }
                    self.stats
                        .extra
                        .push(("connect_seconds", format!("{connect:.3}")));
                } else if sent_at.is_some() && self.converged() {
                    let from = self.stats.first_request.unwrap_or(now);
                    let seconds = self
                        .last_change
                        .saturating_duration_since(from)
                        .as_secs_f64();
                    done = Some((
                        true,
                        vec![
                            ("seconds", format!("{seconds:.3}")),
                            ("converged_at_s", at(self.stats.started, self.last_change)),
                        ],
                    ));
                } else if now >= *deadline {
                    done = Some((false, vec![]));
                }
            }
            Phase::Steady { end } => {
                if now >= *end {
                    let elapsed = (now - self.stats.started).as_secs_f64();
                    let rate = self.stats.heartbeat_us.len() as f64 / elapsed;
                    let target = self
                        .pace
                        .as_ref()
                        .map_or("null".into(), |p| format!("{:.0}", p.0));
                    self.stop_pacing(now);
                    done = Some((
                        true,
                        vec![
                            ("achieved_per_s", format!("{rate:.1}")),
                            ("target_per_s", target),
                        ],
                    ));
                }
            }
            Phase::Churn {
                end,
                rate,
                delay,
                started,
                settle_deadline,
                unowned_at_end,
            } => {
                if now < *end {
                    let due = ((now - self.stats.started).as_secs_f64() * *rate) as u64;
                    let (count, delay) = (due.saturating_sub(*started), *delay);
                    *started = due.max(*started);
                    for _ in 0..count {
                        // A member in the group, not restarting already (a few tries).
                        for _ in 0..8 {
                            let i = (self.uniform() * members as f64) as usize % members;
                            if self.members[i].state == State::In && !self.members[i].restarting {
                                self.restart(i, delay);
                                break;
                            }
                        }
                    }
                } else {
                    let settled = self.converged();
                    let limit = *end + *settle_deadline;
                    if unowned_at_end.is_none() {
                        *unowned_at_end = Some(
                            self.ledger.unowned_seconds(now) - self.stats.unowned_seconds_before,
                        );
                    }
                    if settled || now >= limit {
                        let churn_only = unowned_at_end.unwrap_or(0.0);
                        let settle = if settled {
                            format!(
                                "{:.3}",
                                self.last_change
                                    .saturating_duration_since(*end)
                                    .as_secs_f64()
                            )
                        } else {
                            "null".into()
                        };
                        done = Some((
                            settled,
                            vec![
                                (
                                    "unowned_partition_seconds_churning",
                                    format!("{churn_only:.3}"),
                                ),
                                ("settle_seconds", settle),
                            ],
                        ));
                    }
                }
            }
            Phase::Roll {
                queue,
                concurrency,
                deadline,
                rolled_at,
            } => {
                let concurrency = *concurrency;
                if rolled_at.is_none() && queue.is_empty() && self.restarts_in_progress == 0 {
                    *rolled_at = Some(now);
                }
                let rolled = *rolled_at;
                let limit = *deadline;
                self.roll_more(queue, concurrency);
                if let Some(rolled) = rolled.filter(|_| self.converged()) {
                    let end = self.last_change.max(rolled);
                    done = Some((
                        true,
                        vec![
                            (
                                "seconds",
                                format!("{:.3}", (end - self.stats.started).as_secs_f64()),
                            ),
                            (
                                "rolled_seconds",
                                format!("{:.3}", (rolled - self.stats.started).as_secs_f64()),
                            ),
                        ],
                    ));
                } else if now >= limit {
                    done = Some((false, vec![]));
                }
            }
            Phase::WaitOwned { deadline } => {
                if self.converged() {
                    let seconds = self
                        .last_change
                        .saturating_duration_since(self.stats.started)
                        .as_secs_f64();
                    done = Some((true, vec![("seconds", format!("{seconds:.3}"))]));
                } else if now >= *deadline {
                    done = Some((false, vec![]));
                }
            }
            Phase::Leave { deadline } => {
                if self.leaves_pending == 0 || now >= *deadline {
                    let seconds = (now - self.stats.started).as_secs_f64();
                    done = Some((
                        self.leaves_pending == 0,
                        vec![("seconds", format!("{seconds:.3}"))],
                    ));
                }
            }
        }
        match done {
            Some((ok, fields)) => self.finish(ok, fields, now),
            None => self.phase = phase,
        }
    }

    fn roll_more(&mut self, queue: &mut VecDeque<usize>, concurrency: usize) {
        while self.restarts_in_progress < concurrency {
            let Some(i) = queue.pop_front() else { return };
            if self.members[i].state != State::In {
                // Not in the group right now (rejoining after fencing): its turn comes later.
                queue.push_back(i);
                return;
            }
            self.restart(i, Duration::ZERO);
        }
    }

    fn start(&mut self, command: &str, now: Instant) {
        let words: Vec<&str> = command.split_whitespace().collect();
        let arg = |k: usize, default: f64| -> f64 {
            words.get(k).and_then(|w| w.parse().ok()).unwrap_or(default)
        };
        let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
        self.stats = Stats::new(now);
        self.stats.name = words.first().copied().unwrap_or("").to_string();
        self.stats.ownership_violations_before = self.ledger.violations;
        self.stats.unowned_seconds_before = self.ledger.unowned_seconds(now);
        self.phase = match words.first().copied() {
            Some("connect") => {
                for c in 0..self.conns.len() {
                    self.want_connection(c);
                }
                Phase::Connect {
                    deadline: now + secs(arg(1, 600.0)),
                }
            }
            Some("join") => {
                for c in 0..self.conns.len() {
                    self.want_connection(c);
                }
                Phase::Join {
                    deadline: now + secs(arg(1, 600.0)),
                    sent_at: None,
                }
            }
            Some("steady") => {
                if words.len() > 2 {
                    self.start_pacing(arg(2, 1000.0), now);
                } else {
                    self.spread_heartbeats(now);
                }
                Phase::Steady {
                    end: now + secs(arg(1, 10.0)),
                }
            }
            Some("churn") => Phase::Churn {
                end: now + secs(arg(1, 10.0)),
                rate: arg(2, 1.0) / 100.0 * self.cfg.members as f64,
                delay: secs(arg(3, 0.0)),
                started: 0,
                settle_deadline: secs(arg(4, 120.0)),
                unowned_at_end: None,
            },
            Some("roll") => Phase::Roll {
                queue: (0..self.cfg.members).collect(),
                concurrency: arg(1, (self.cfg.members as f64 / 100.0).ceil()).max(1.0) as usize,
                deadline: now + secs(arg(2, 600.0)),
                rolled_at: None,
            },
            Some("wait-owned") => {
                let total = arg(1, self.ledger.total as f64) as usize;
                self.ledger.set_total(total, now);
                self.change(now);
                Phase::WaitOwned {
                    deadline: now + secs(arg(2, 300.0)),
                }
            }
            Some("leave") => {
                for i in 0..self.cfg.members {
                    match self.members[i].state {
                        State::In | State::Joining => self.leave(i, AfterLeave::Close),
                        _ => {
                            self.cancel_timer(i);
                            self.release_connection(i);
                        }
                    }
                }
                Phase::Leave {
                    deadline: now + secs(arg(1, 120.0)),
                }
            }
            Some("quit") => {
                self.quit = true;
                Phase::Idle
            }
            _ => {
                eprintln!("consumer-driver: unknown command {command:?}");
                Phase::Idle
            }
        };
    }

    fn start_pacing(&mut self, rate: f64, now: Instant) {
        let mut idle = VecDeque::new();
        for i in 0..self.cfg.members {
            let m = &self.members[i];
            if m.state == State::In && m.in_flight.is_none() && !m.report {
                self.cancel_timer(i);
                idle.push_back(i as u32);
            }
        }
        self.pace = Some((rate.max(1.0), now, 0, idle));
    }

    /// Members that joined in one storm heartbeat in step; independently started clients do
    /// not: each member's next heartbeat moves to a uniform point of its interval from now.
    fn spread_heartbeats(&mut self, now: Instant) {
        for i in 0..self.cfg.members {
            if self.members[i].timer == crate::Timer::Heartbeat {
                let at = now + self.members[i].interval.mul_f64(self.uniform());
                self.set_timer(i, crate::Timer::Heartbeat, at);
            }
        }
    }

    /// Back to each member's own interval, spread over it as independent clients are.
    fn stop_pacing(&mut self, now: Instant) {
        let Some((_, _, _, idle)) = self.pace.take() else {
            return;
        };
        for i in idle {
            let i = i as usize;
            let at = now + self.members[i].interval.mul_f64(self.uniform());
            self.set_timer(i, crate::Timer::Heartbeat, at);
        }
    }

    /// Forced rate: heartbeats due by now go to the members that waited longest.
    pub fn paced_sends(&mut self) {
        let Some((rate, start, sent, _)) = &self.pace else {
            return;
        };
        let due = ((start.elapsed().as_secs_f64() * rate) as u64).saturating_sub(*sent);
        for _ in 0..due {
            let Some((_, _, sent, idle)) = &mut self.pace else {
                return;
            };
            let Some(i) = idle.pop_front() else { return };
            *sent += 1;
            let i = i as usize;
            if self.members[i].state == State::In && self.members[i].in_flight.is_none() {
                self.send(i, crate::Req::Heartbeat);
            }
        }
    }

    fn finish(&mut self, ok: bool, fields: Vec<(&'static str, String)>, now: Instant) {
        let s = &mut self.stats;
        let cpu = cpu_seconds();
        let (user, sys) = (cpu.user - s.cpu.user, cpu.system - s.cpu.system);
        let ownership = self.ledger.violations - s.ownership_violations_before;
        let unowned_s = self.ledger.unowned_seconds(now) - s.unowned_seconds_before;
        let s = &mut self.stats;
        let mut out = String::with_capacity(1024);
        let _ = write!(
            out,
            "{{\"phase\":\"{}\",\"ok\":{ok},\"members\":{},\"members_per_connection\":{},\"connections\":{},\"max_in_flight_per_connection\":{}",
            s.name, self.cfg.members, self.cfg.members_per_connection, self.conns.len(), s.max_in_flight
        );
        if matches!(s.name.as_str(), "churn" | "roll") {
            // How a restart went: a new connection per new process, or on the shared one.
            let how = if self.cfg.members_per_connection == 1 {
                "new connection"
            } else {
                "leave and rejoin on the shared connection"
            };
            let _ = write!(out, ",\"restart\":\"{how}\"");
        }
        for (k, v) in fields.iter().chain(s.extra.iter()) {
            let _ = write!(out, ",\"{k}\":{v}");
        }
        let epoch = if self.epochs.len() == 1 {
            self.epochs.keys().next().unwrap().to_string()
        } else {
            "null".into()
        };
        let _ = write!(
            out,
            ",\"wall_seconds\":{:.3},\"first_request_at_s\":{},\"epoch\":{epoch},\"epochs_now\":{},\"in_group\":{},\
             \"heartbeat_ms\":{},\"join_ms\":{},\"leave_ms\":{},\"requests\":{},\"answers\":{},\"restarts\":{},\
             \"violations\":{},\"violations_ownership\":{ownership},\"overlaps_after_session_timeout\":{},\"violation_examples\":[{}],\
             \"unowned_partition_seconds\":{unowned_s:.3},\"unowned_now\":{},\"owned_twice_now\":{},\"partitions\":{},\
             \"errors\":{{{}}},\"error_messages\":[{}],\"driver_cpu_user_s\":{user:.3},\"driver_cpu_sys_s\":{sys:.3},\
             \"driver_us_per_request\":{},\"driver_user_us_per_request\":{}}}",
            (now - s.started).as_secs_f64(),
            s.first_request.map_or("null".into(), |t| at(s.started, t)),
            self.epochs.len(),
            self.in_group,
            percentiles(&mut s.heartbeat_us),
            percentiles(&mut s.join_us),
            percentiles(&mut s.leave_us),
            s.requests,
            s.answers,
            s.restarts,
            ownership + s.other_violations,
            s.expired_overlaps,
            s.examples.iter().take(10).map(|e| format!("{e:?}")).collect::<Vec<_>>().join(","),
            self.ledger.unowned(),
            self.ledger.owned_twice(),
            self.ledger.total,
            s.errors.iter().map(|(k, n)| format!("\"{k}\":{n}")).collect::<Vec<_>>().join(","),
            s.error_messages.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(","),
            per_answer(user + sys, s.answers),
            per_answer(user, s.answers),
        );
        println!("{out}");
        self.phase = Phase::Idle;
        self.stats = Stats::new(now);
    }
}

fn per_answer(cpu_seconds: f64, answers: u64) -> String {
    if answers == 0 {
        return "null".into();
    }
    format!("{:.2}", cpu_seconds * 1e6 / answers as f64)
}

fn at(start: Instant, t: Instant) -> String {
    format!("{:.3}", t.saturating_duration_since(start).as_secs_f64())
}

/// {"count", "p50", "p99", "max"} in milliseconds.
fn percentiles(us: &mut [u32]) -> String {
    if us.is_empty() {
        return "{\"count\":0}".into();
    }
    us.sort_unstable();
    let pick = |q: f64| us[((q * us.len() as f64) as usize).min(us.len() - 1)] as f64 / 1000.0;
    format!(
        "{{\"count\":{},\"p50\":{:.3},\"p99\":{:.3},\"max\":{:.3}}}",
        us.len(),
        pick(0.5),
        pick(0.99),
        *us.last().unwrap() as f64 / 1000.0
    )
}
