//! join-storm: N classic consumer-group members join one empty group at once, as
//! `corral load --scenario join-storm` runs them, at a few us of CPU per request instead of
//! ~1 ms per member, so that a 2-core machine can show the broker's side of a 10,000-member join.
//!
//! Each member behaves as src/corral/load/member.py's ClassicMember inside scenarios/common.py's
//! stay_in_group: its own connection (opened with at most --connects-in-flight connects and
//! ApiVersions handshakes at once, like corral load's connect slots), JoinGroup v9 (KIP-394:
//! MEMBER_ID_REQUIRED hands out the id, rejoin with it), the leader computes the range assignment
//! and sends it in SyncGroup v5, followers sync with none; then Heartbeat v4 every
//! --heartbeat-interval-ms (the first one after a uniform random share of it), rejoining on
//! REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID (the last with an empty id),
//! with corral load's backoff (0.1 s * 2^attempt, at most 1 s) after other errors.
//!
//! The run ends when the newest generation a leader saw has all N members and every one of them
//! holds its SyncGroup answer of that generation (corral load's AssignmentLedger.stable_generation),
//! or at --timeout. Output: one JSON line on stdout (see `report`).
//!
//!     join-storm --port 9092 --members 10000 --group g --topics t-0:2000,t-1:2000 [--timeout 120]

mod connections;
mod protocol;

use heartbeat_driver::args::Options;
use heartbeat_driver::schedule::{Rng, Timers};
use heartbeat_driver::socket::{self, ConnectSlots, Outbox};
use heartbeat_driver::sys::{check, cpu_seconds};
use protocol::{self as p, TopicPartitions};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::process::exit;
use std::time::{Duration, Instant};

const NONE: i16 = 0;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const BACKOFF_S: f64 = 0.1;
const BACKOFF_MAX_S: f64 = 1.0;
const READ_BUF: usize = 256 * 1024;
const MAX_EVENTS: usize = 1024;
const MAX_FRAME: usize = 256 << 20;
const CLIENT_ID: &str = "corral-join-storm";

struct Config {
    port: u16,
    members: usize,
    group: String,
    topics: Vec<(String, i32)>,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    heartbeat_interval: Duration,
    connects_in_flight: usize,
    timeout: Duration,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Api {
    Join,
    Sync,
    Heartbeat,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Join => "JOIN_GROUP",
            Api::Sync => "SYNC_GROUP",
            Api::Heartbeat => "HEARTBEAT",
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Conn {
    Down,
    WaitingSlot,
    Connecting,
    Handshake,
    Ready,
}

#[derive(Clone, Copy, PartialEq)]
enum Timer {
    None,
    /// Backoff over: the next JoinGroup attempt.
    Join,
    Heartbeat,
    /// The request in flight (or waiting for its connection) took too long.
    Timeout,
}

struct Member {
    fd: i32,
    /// Bumped per connection, so that events of a closed socket are not applied to the next one.
    serial: u32,
    conn: Conn,
    holds_slot: bool,
    ever_connected: bool,
    out: Outbox,
    inbuf: Vec<u8>,
    correlation: i32,
    expected: i32,
    in_flight: Option<Api>,
    /// The request frame waiting for the connection to be opened.
    pending: Option<Vec<u8>>,
    timer: Timer,
    timer_token: u64,
    member_id: String,
    generation: i32,
    sync_generation: i32,
    protocol_name: Option<String>,
    assignment: TopicPartitions,
    attempt: u32,
}

/// What leaders and synced members reported, by generation (corral load's AssignmentLedger).
#[derive(Default)]
struct Ledger {
    size: BTreeMap<i32, usize>,
    synced: HashMap<i32, HashSet<String>>,
    owner: HashMap<i32, HashSet<(String, i32)>>,
    violations: u64,
    examples: Vec<String>,
}

impl Ledger {
    fn violation(&mut self, what: String) {
        self.violations += 1;
        if self.examples.len() < 10 {
            self.examples.push(what);
        }
    }

    fn synced_member(&mut self, generation: i32, member_id: &str, assignment: &TopicPartitions) {
        if !self
            .synced
            .entry(generation)
            .or_default()
            .insert(member_id.to_string())
        {
            return;
        }
        let owned = self.owner.entry(generation).or_default();
        let mut doubles = Vec::new();
        for (topic, parts) in assignment {
            for &p in parts {
                if !owned.insert((topic.clone(), p)) {
                    doubles.push(format!(
                        "generation {generation}: {topic}-{p} assigned twice"
                    ));
                }
            }
        }
        doubles.into_iter().for_each(|d| self.violation(d));
    }

    fn stable_generation(&self, members: usize) -> Option<i32> {
        let (&generation, &size) = self.size.iter().next_back()?;
        let synced = self.synced.get(&generation).map_or(0, |s| s.len());
        (size == members && synced >= members).then_some(generation)
    }
}

struct Storm {
    cfg: Config,
    topic_names: Vec<String>,
    epoll: i32,
    members: Vec<Member>,
    slots: ConnectSlots,
    timers: Timers<usize>,
    read_buf: Vec<u8>,
    /// recvmsg's ancillary data (none asked for here: socket.rs's reads serve timed drivers too).
    control: [u64; 16],
    rng: Rng,
    ledger: Ledger,
    errors: BTreeMap<String, u64>,
    requests: BTreeMap<&'static str, u64>,
    connects: u64,
    connected_members: usize,
    versions_checked: bool,
    started: Instant,
    first_join_sent: Option<Instant>,
    all_connected_at: Option<Instant>,
    last_synced_at: Option<Instant>,
    stable_generation: Option<i32>,
}

fn main() {
    let cfg = parse_args().unwrap_or_else(|e| {
        eprintln!("join-storm: {e}");
        exit(2)
    });
    let mut storm = Storm::new(cfg).unwrap_or_else(|e| {
        eprintln!("join-storm: setup: {e}");
        exit(1)
    });
    let cpu_start = cpu_seconds();
    storm.run();
    let cpu_end = cpu_seconds();
    println!(
        "{}",
        storm.report((
            cpu_end.user - cpu_start.user,
            cpu_end.total() - cpu_start.total()
        ))
    );
    // Exiting closes every connection; the broker is stopped by the caller.
}

impl Storm {
    fn new(cfg: Config) -> io::Result<Storm> {
        let epoll = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let mut topic_names: Vec<String> = cfg.topics.iter().map(|(t, _)| t.clone()).collect();
        topic_names.sort();
        let members = (0..cfg.members)
            .map(|_| Member {
                fd: -1,
                serial: 0,
                conn: Conn::Down,
                holds_slot: false,
                ever_connected: false,
                out: Outbox::default(),
                inbuf: Vec::new(),
                correlation: 0,
                expected: 0,
                in_flight: None,
                pending: None,
                timer: Timer::None,
                timer_token: 0,
                member_id: String::new(),
                generation: -1,
                sync_generation: -1,
                protocol_name: None,
                assignment: Vec::new(),
                attempt: 0,
            })
            .collect();
        Ok(Storm {
            slots: ConnectSlots::new(cfg.connects_in_flight),
            cfg,
            topic_names,
            epoll,
            members,
            timers: Timers::default(),
            read_buf: vec![0; READ_BUF],
            control: [0; 16],
            rng: Rng::from_clock(),
            ledger: Ledger::default(),
            errors: BTreeMap::new(),
            requests: BTreeMap::new(),
            connects: 0,
            connected_members: 0,
            versions_checked: false,
            started: Instant::now(),
            first_join_sent: None,
            all_connected_at: None,
            last_synced_at: None,
            stable_generation: None,
        })
    }

    fn run(&mut self) {
        self.started = Instant::now();
        let deadline = self.started + self.cfg.timeout;
        for i in 0..self.members.len() {
            self.start_join(i);
        }
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        while self.stable_generation.is_none() {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            let next = self
                .timers
                .next_at()
                .map_or(deadline, |at| at.min(deadline));
            let wait_ms = next
                .saturating_duration_since(now)
                .as_micros()
                .div_ceil(1000) as i32;
            let n = unsafe {
                libc::epoll_wait(self.epoll, events.as_mut_ptr(), MAX_EVENTS as i32, wait_ms)
            };
            for ev in &events[..n.max(0) as usize] {
                let (i, serial) = socket::event_source(ev.u64);
                self.on_event(i, serial, ev.events);
            }
            self.fire_timers();
        }
    }

    // ------------------------------------------------------------- member state machine

    /// stay_in_group's `member.join()`: a fresh series of attempts.
    fn start_join(&mut self, i: usize) {
        self.members[i].attempt = 0;
        self.join_attempt(i);
    }

    fn join_attempt(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.attempt += 1;
        let owned = std::mem::take(&mut m.assignment);
        let subscription = p::subscription(&self.topic_names, &owned, m.generation);
        m.correlation += 1;
        let frame = p::join_group(
            m.correlation,
            CLIENT_ID,
            &p::Join {
                group: &self.cfg.group,
                session_timeout_ms: self.cfg.session_timeout_ms,
                rebalance_timeout_ms: self.cfg.rebalance_timeout_ms,
                member_id: &m.member_id,
                assignor: "range",
                subscription: &subscription,
            },
        );
        let timeout = Duration::from_millis(self.cfg.rebalance_timeout_ms as u64) + REQUEST_TIMEOUT;
        self.request(i, Api::Join, frame, timeout);
    }

    fn on_join(&mut self, i: usize, answer: p::JoinAnswer) {
        let m = &mut self.members[i];
        match answer.error {
            MEMBER_ID_REQUIRED => {
                m.member_id = answer.member_id;
                return self.join_attempt(i);
            }
            UNKNOWN_MEMBER_ID => {
                m.member_id.clear();
                return self.join_attempt(i);
            }
            NONE => {}
            _ => return self.backoff_then_join(i),
        }
        m.member_id = answer.member_id;
        if answer.generation < m.generation {
            let what = format!(
                "member {}: generation went from {} to {}",
                m.member_id, m.generation, answer.generation
            );
            self.ledger.violation(what);
        }
        let m = &mut self.members[i];
        m.generation = answer.generation;
        m.sync_generation = answer.generation;
        m.protocol_name = answer.protocol_name;
        let assignments = if answer.leader == m.member_id {
            self.lead(&answer.members, answer.generation)
        } else {
            Vec::new()
        };
        let m = &mut self.members[i];
        m.correlation += 1;
        let frame = p::sync_group(
            m.correlation,
            CLIENT_ID,
            &self.cfg.group,
            m.sync_generation,
            &m.member_id,
            m.protocol_name.as_deref(),
            &assignments,
        );
        let timeout = Duration::from_millis(self.cfg.rebalance_timeout_ms as u64) + REQUEST_TIMEOUT;
        self.request(i, Api::Sync, frame, timeout);
    }

    /// The leader's part: every member's subscription decoded, the range assignment encoded.
    fn lead(&mut self, members: &[(String, Vec<u8>)], generation: i32) -> Vec<(String, Vec<u8>)> {
        let mut subscriptions = Vec::with_capacity(members.len());
        for (id, metadata) in members {
            let topics = p::subscription_topics(metadata).unwrap_or_else(|e| {
                self.ledger
                    .violation(format!("member {id}: undecodable subscription: {e}"));
                Vec::new()
            });
            subscriptions.push((id.clone(), topics));
        }
        self.ledger.size.insert(generation, members.len());
        self.check_stable();
        p::range_assign(&subscriptions, &self.cfg.topics)
            .into_iter()
            .map(|(id, tps)| (id, p::assignment(&tps)))
            .collect()
    }

    fn on_sync(&mut self, i: usize, error: i16, assignment: &[u8]) {
        let m = &mut self.members[i];
        if error == UNKNOWN_MEMBER_ID {
            m.member_id.clear();
        }
        if error == REBALANCE_IN_PROGRESS {
            return self.join_attempt(i);
        }
        if error != NONE {
            return self.backoff_then_join(i);
        }
        m.assignment = p::decode_assignment(assignment).unwrap_or_else(|e| {
            self.ledger
                .violation(format!("undecodable assignment: {e}"));
            Vec::new()
        });
        let m = &self.members[i];
        let now = Instant::now();
        self.last_synced_at = Some(self.last_synced_at.map_or(now, |t| t.max(now)));
        let (generation, id, tps) = (m.sync_generation, m.member_id.clone(), m.assignment.clone());
        self.ledger.synced_member(generation, &id, &tps);
        self.check_stable();
        // Spread the members' heartbeats over the interval, as independent clients are.
        let first = self.cfg.heartbeat_interval.mul_f64(self.rng.uniform());
        self.set_timer(i, Timer::Heartbeat, now + first);
    }

    fn heartbeat(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.correlation += 1;
        let frame = p::heartbeat(
            m.correlation,
            CLIENT_ID,
            &self.cfg.group,
            m.generation,
            &m.member_id,
        );
        self.request(i, Api::Heartbeat, frame, REQUEST_TIMEOUT);
    }

    fn on_heartbeat(&mut self, i: usize, error: i16) {
        if error == UNKNOWN_MEMBER_ID {
            self.members[i].member_id.clear();
        }
        if matches!(
            error,
            REBALANCE_IN_PROGRESS | UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION
        ) {
            return self.start_join(i);
        }
        let at = Instant::now() + self.cfg.heartbeat_interval;
        self.set_timer(i, Timer::Heartbeat, at);
    }

    fn backoff_then_join(&mut self, i: usize) {
        let attempt = self.members[i].attempt.min(8) as i32;
        let seconds = BACKOFF_MAX_S.min(BACKOFF_S * 2f64.powi(attempt));
        self.set_timer(
            i,
            Timer::Join,
            Instant::now() + Duration::from_secs_f64(seconds),
        );
    }

    /// The request failed at the connection level (or timed out): the connection is dropped,
    /// then the member goes on as ClassicMember does when `request()` returns None.
    fn fail(&mut self, i: usize, what: &str) {
        let api = self.members[i].in_flight.take();
        self.members[i].pending = None;
        self.disconnect(i);
        let Some(api) = api else { return };
        *self
            .errors
            .entry(format!("{}:{what}", api.name()))
            .or_default() += 1;
        match api {
            Api::Join | Api::Sync => self.backoff_then_join(i),
            // A heartbeat without an answer keeps the member in the group; the next reconnects.
            Api::Heartbeat => {
                let at = Instant::now() + self.cfg.heartbeat_interval;
                self.set_timer(i, Timer::Heartbeat, at);
            }
        }
    }

    fn check_stable(&mut self) {
        if self.stable_generation.is_none() {
            self.stable_generation = self.ledger.stable_generation(self.cfg.members);
            if let Some(generation) = self.stable_generation {
                let all: HashSet<(String, i32)> = self
                    .cfg
                    .topics
                    .iter()
                    .flat_map(|(t, n)| (0..*n).map(move |p| (t.clone(), p)))
                    .collect();
                let owned = self
                    .ledger
                    .owner
                    .get(&generation)
                    .cloned()
                    .unwrap_or_default();
                let missing = all.difference(&owned).count();
                if missing > 0 {
                    self.ledger.violation(format!(
                        "generation {generation}: {missing} partitions assigned to no member"
                    ));
                }
            }
        }
    }

    // ------------------------------------------------------------- timers and report

    fn set_timer(&mut self, i: usize, timer: Timer, at: Instant) {
        let m = &mut self.members[i];
        m.timer = timer;
        m.timer_token += 1;
        self.timers.push(at, i, m.timer_token);
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some((i, token)) = self.timers.pop_due(now) {
            let m = &mut self.members[i];
            if m.timer_token != token {
                continue;
            }
            match std::mem::replace(&mut m.timer, Timer::None) {
                Timer::None => {}
                Timer::Join => self.join_attempt(i),
                Timer::Heartbeat => self.heartbeat(i),
                Timer::Timeout => self.fail(i, "TIMEOUT"),
            }
        }
    }

    fn report(&self, (user, cpu): (f64, f64)) -> String {
        let secs =
            |t: Option<Instant>, from: Option<Instant>| match (t, from, self.stable_generation) {
                (Some(t), Some(from), Some(_)) => {
                    format!("{:.3}", t.saturating_duration_since(from).as_secs_f64())
                }
                _ => "null".into(),
            };
        let map = |m: Vec<(String, u64)>| {
            m.iter()
                .map(|(k, n)| format!("\"{k}\":{n}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let examples: Vec<String> = self
            .ledger
            .examples
            .iter()
            .map(|e| format!("{e:?}"))
            .collect();
        format!(
            "{{\"members\":{},\"join_seconds\":{},\"from_start_seconds\":{},\"connect_seconds\":{},\
             \"generations_seen\":{},\"stable_generation\":{},\"stable\":{},\"errors\":{{{}}},\"requests\":{{{}}},\
             \"connects\":{},\"driver_cpu\":{cpu:.3},\"driver_user_cpu\":{user:.3},\"wall_seconds\":{:.3},\
             \"violations\":{},\"violation_examples\":[{}]}}",
            self.cfg.members,
            secs(self.last_synced_at, self.first_join_sent),
            secs(self.last_synced_at, Some(self.started)),
            self.all_connected_at.map_or("null".into(), |t| format!("{:.3}", (t - self.started).as_secs_f64())),
            self.ledger.size.len(),
            self.stable_generation.map_or("null".into(), |g| g.to_string()),
            self.stable_generation.is_some(),
            map(self.errors.iter().map(|(k, n)| (k.clone(), *n)).collect()),
            map(self.requests.iter().map(|(k, n)| (k.to_string(), *n)).collect()),
            self.connects,
            self.started.elapsed().as_secs_f64(),
            self.ledger.violations,
            examples.join(","),
        )
    }
}

/// The versions this driver speaks must be offered (corral load would otherwise pick older ones).
fn check_versions(apis: &[(i16, i16)]) {
    for (key, version) in [
        (p::JOIN_GROUP, p::JOIN_GROUP_V),
        (p::SYNC_GROUP, p::SYNC_GROUP_V),
        (p::HEARTBEAT, p::HEARTBEAT_V),
    ] {
        if !apis.iter().any(|&(k, max)| k == key && max >= version) {
            eprintln!("join-storm: the broker does not offer API {key} v{version}");
            exit(1);
        }
    }
}

fn parse_args() -> Result<Config, String> {
    let opts = Options::from_env()?;
    let topics = opts
        .get("topics")
        .ok_or("--topics NAME:PARTITIONS,... is required")?
        .split(',')
        .map(|t| {
            let (name, n) = t
                .rsplit_once(':')
                .ok_or(format!("--topics: {t} is not NAME:PARTITIONS"))?;
            Ok((
                name.to_string(),
                n.parse()
                    .map_err(|_| format!("--topics: bad count in {t}"))?,
            ))
        })
        .collect::<Result<Vec<(String, i32)>, String>>()?;
    let cfg = Config {
        port: opts.num("port", None)?,
        members: opts.num("members", None)?,
        group: opts.get("group").ok_or("--group is required")?.to_string(),
        topics,
        session_timeout_ms: opts.num("session-timeout-ms", Some(45000))?,
        rebalance_timeout_ms: opts.num("rebalance-timeout-ms", Some(300000))?,
        heartbeat_interval: Duration::from_millis(opts.num("heartbeat-interval-ms", Some(3000))?),
        connects_in_flight: opts.num("connects-in-flight", Some(500))?,
        timeout: Duration::from_secs_f64(opts.num("timeout", Some(120.0))?),
    };
    if cfg.members == 0 || cfg.connects_in_flight == 0 {
        return Err("--members and --connects-in-flight must be positive".into());
    }
    Ok(cfg)
}
