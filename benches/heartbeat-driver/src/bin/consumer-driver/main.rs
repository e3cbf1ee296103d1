//! consumer-driver: N KIP-848 consumer-protocol members of one group, played the way the Java
//! consumer plays them, at a few us of CPU per heartbeat, so that one 2-core machine can drive
//! tens of thousands of members against corral or Apache Kafka (benches/consumer_scale.py).
//!
//! Each member has its own connection (ApiVersions first; source addresses 127.0.0.1, .2, ...
//! round-robin past the ~28k ephemeral ports of one address), or with --members-per-connection K
//! K members share one (past a process's open-file limit): their requests in flight together, at
//! most one per member, answers matched to members by correlation id. A restart then leaves and
//! rejoins on the shared connection instead of opening a new one; a shared connection that drops
//! is reopened and its members go on as a member whose own connection dropped. It joins with epoch 0 and every
//! field (rebalance timeout, subscribed topic names, empty owned partitions, the server assignor
//! if given, group.instance.id for static members), then sends incremental heartbeats (group,
//! member id, epoch) every HeartbeatIntervalMs the broker returned, adding its owned partitions
//! only when they changed, at once: that acknowledges a revocation. FENCED_MEMBER_EPOCH and
//! UNKNOWN_MEMBER_ID drop everything and rejoin at epoch 0 with the same id; a lost answer makes
//! the next request full. Leaving is epoch -1, or -2 for a static member.
//!
//! Every answer goes through the ownership ledger (ledger.rs): a partition owned by two members at
//! once is a violation, and so is a quiet group with a partition nobody owns. "Quiet": every member
//! in the group at one epoch, and each answered again at least max(1 s, the longest heartbeat
//! interval) after the last change of any member's epoch or partitions.
//!
//! The run is a series of phases, one command each, from stdin (or --commands "a; b; ..."); each
//! prints one JSON line (phases.rs). Members keep heartbeating between phases.
//!
//!     connect [TIMEOUT_S]               open every connection (ApiVersions answered); no member joins
//!     join [TIMEOUT_S]                  connect all, then all join at once; until converged
//!     steady SECONDS [RATE]             heartbeats at the broker's interval (first spread over
//!                                       it: one storm's members would beat in step), or RATE/s
//!     churn SECONDS PERCENT_PER_S [REJOIN_DELAY_S] [SETTLE_TIMEOUT_S]
//!     roll [CONCURRENCY] [TIMEOUT_S]    restart every member once (static: same instance id)
//!     wait-owned PARTITIONS [TIMEOUT_S] the topics now have PARTITIONS: until quiet and all owned
//!     leave [TIMEOUT_S]                 every member leaves at once; until every leave is answered
//!     quit
//!
//!     consumer-driver --port 9092 --members 1000 --group g --topics t --partitions 1000
//!         [--static 1] [--server-assignor uniform] [--rebalance-timeout-ms 300000]
//!         [--max-version 1] [--connects-in-flight 500] [--request-timeout-ms 30000]
//!         [--session-timeout-ms 45000] [--members-per-connection 1]
//!         [--sources N (default: one per 10,000 connections)] [--first-source K] [--commands "..."]

mod ledger;
mod members;
mod net;
mod phases;
mod protocol;

use heartbeat_driver::args::Options;
use heartbeat_driver::schedule::{Rng, Timers};
use heartbeat_driver::sys::{check, set_nonblocking};
use ledger::{Ledger, TopicIds, Tp};
use net::Connection;
use phases::{Phase, Stats};
use std::collections::{HashMap, VecDeque};
use std::process::exit;
use std::time::{Duration, Instant};

pub const CLIENT_ID: &str = "corral-consumer-driver";
const MAX_EVENTS: usize = 1024;
/// After handling a batch of events, wait this long before the next epoll_wait, so that answers
/// are collected in batches: a wake-up per answer costs this VM more than handling it.
const BATCH: Duration = Duration::from_micros(500);
const READ_BUF: usize = 256 * 1024;
/// Connections per source address: well under the 28,232 ports of Linux's default ephemeral
/// range, with room for the TIME_WAIT ports restarts leave behind.
const CONNECTIONS_PER_SOURCE: usize = 10_000;

pub struct Config {
    pub port: u16,
    pub members: usize,
    pub group: String,
    pub topics: Vec<String>,
    pub partitions: usize,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub static_members: bool,
    pub max_version: i16,
    pub connects_in_flight: usize,
    /// K members share one connection (1: a connection per member, as the Java client).
    pub members_per_connection: usize,
    pub sources: usize,
    /// Source addresses are 127.0.0.(first_source + 1 + k % sources).
    pub first_source: usize,
    pub request_timeout: Duration,
    /// The group's session timeout: an owner unanswered this long may have been expired.
    pub session_timeout: Duration,
    pub commands: Option<Vec<String>>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Conn {
    Down,
    WaitingSlot,
    Connecting,
    Handshake,
    Ready,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum State {
    /// Not in the group and not joining (before the join phase, after leaving).
    Out,
    Joining,
    In,
    Leaving,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Req {
    Join,
    Heartbeat,
    Leave,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Timer {
    None,
    Heartbeat,
    /// After an error answer: the same kind of request again.
    Retry,
    /// The request in flight took longer than --request-timeout-ms.
    Timeout,
    /// A restarting member's new process starts.
    Rejoin,
}

/// What a member does once its leave is answered.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum AfterLeave {
    Close,
    Rejoin(Duration),
}

pub struct Member {
    pub in_flight: Option<Req>,
    /// A request waiting for the connection to be opened.
    pub pending: Option<Req>,
    pub sent_at: Instant,
    /// CLOCK_REALTIME ns just before the request's send(): the clock of the kernel's receive
    /// timestamps (SO_TIMESTAMPNS), which time the answers exactly however late they are read.
    pub sent_ns: i64,
    /// When an answer without error last came.
    pub last_ok: Instant,
    pub state: State,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub epoch: i32,
    /// The next request carries every field (a join, or after an answer was lost).
    pub full: bool,
    /// Partitions assigned by the latest answer, sorted.
    pub owned: Vec<Tp>,
    /// Partitions taken away but still held until the next request is sent.
    pub revoked: Vec<Tp>,
    /// `owned` changed since it was last sent: the next request carries it, and goes at once.
    pub report: bool,
    pub interval: Duration,
    pub timer: Timer,
    pub timer_token: u64,
    /// The group's change mark when this member was last confirmed quiet.
    pub mark: u64,
    pub attempt: u32,
    pub after_leave: AfterLeave,
    pub restarting: bool,
    pub restarted: bool,
}

pub struct Driver {
    pub cfg: Config,
    pub epoll: i32,
    pub members: Vec<Member>,
    /// Connection c carries members c*K .. (c+1)*K, K = --members-per-connection.
    pub conns: Vec<Connection>,
    pub slots: heartbeat_driver::socket::ConnectSlots,
    pub next_source: usize,
    pub ready_conns: usize,
    pub timers: Timers<u32>,
    pub read_buf: Vec<u8>,
    /// Receive times of the reads of one connection's data (net.rs `read`).
    pub stamps: Vec<(usize, i64)>,
    pub control: [u64; 16],
    /// The kernel's receive time of the data being handled (CLOCK_REALTIME ns).
    pub received_ns: i64,
    pub rng: Rng,
    /// The ConsumerGroupHeartbeat version used: the broker's highest, at most --max-version.
    pub version: Option<i16>,
    pub topic_ids: TopicIds,
    pub ledger: Ledger,
    pub in_group: usize,
    pub epochs: HashMap<i32, usize>,
    pub change_mark: u64,
    pub last_change: Instant,
    pub confirmed: usize,
    /// The longest heartbeat interval any answer gave (at least 1 s): the quiet period.
    pub quiet: Duration,
    pub stats: Stats,
    pub phase: Phase,
    /// Forced heartbeat rate: (rate, start, sent, members waiting for their turn).
    pub pace: Option<(f64, Instant, u64, VecDeque<u32>)>,
    pub restarts_in_progress: usize,
    pub leaves_pending: usize,
    pub commands: VecDeque<String>,
    pub stdin_buf: String,
    pub stdin_open: bool,
    pub quit: bool,
}

fn main() {
    let cfg = parse_args().unwrap_or_else(|e| {
        eprintln!("consumer-driver: {e}");
        exit(2)
    });
    raise_nofile(cfg.members.div_ceil(cfg.members_per_connection) + 256);
    let mut driver = Driver::new(cfg).unwrap_or_else(|e| {
        eprintln!("consumer-driver: setup: {e}");
        exit(1)
    });
    driver.run();
}

impl Driver {
    fn new(cfg: Config) -> std::io::Result<Driver> {
        let epoll = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let now = Instant::now();
        let mut driver = Driver {
            epoll,
            members: Vec::with_capacity(cfg.members),
            conns: (0..cfg.members.div_ceil(cfg.members_per_connection))
                .map(|_| Connection::default())
                .collect(),
            slots: heartbeat_driver::socket::ConnectSlots::new(cfg.connects_in_flight),
            next_source: 0,
            ready_conns: 0,
            timers: Timers::default(),
            read_buf: vec![0; READ_BUF],
            stamps: Vec::new(),
            control: [0; 16],
            received_ns: 0,
            rng: Rng::from_clock(),
            version: None,
            topic_ids: TopicIds::default(),
            ledger: Ledger::new(cfg.partitions, now),
            in_group: 0,
            epochs: HashMap::new(),
            change_mark: 0,
            last_change: now,
            confirmed: 0,
            quiet: Duration::from_secs(1),
            stats: Stats::new(now),
            phase: Phase::Idle,
            pace: None,
            restarts_in_progress: 0,
            leaves_pending: 0,
            commands: cfg.commands.clone().unwrap_or_default().into(),
            stdin_buf: String::new(),
            stdin_open: cfg.commands.is_none(),
            quit: false,
            cfg,
        };
        for k in 0..driver.cfg.members {
            let instance_id = driver
                .cfg
                .static_members
                .then(|| format!("{}-instance-{k}", driver.cfg.group));
            let member = Member {
                in_flight: None,
                pending: None,
                sent_at: now,
                sent_ns: 0,
                last_ok: now,
                state: State::Out,
                member_id: String::new(),
                instance_id,
                epoch: 0,
                full: true,
                owned: Vec::new(),
                revoked: Vec::new(),
                report: false,
                interval: Duration::from_secs(5),
                timer: Timer::None,
                timer_token: 0,
                mark: 0,
                attempt: 0,
                after_leave: AfterLeave::Close,
                restarting: false,
                restarted: false,
            };
            driver.members.push(member);
        }
        if driver.stdin_open {
            set_nonblocking(0)?;
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: u64::MAX,
            };
            check(unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, 0, &mut ev) })?;
        }
        Ok(driver)
    }

    fn run(&mut self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        while !self.quit {
            let now = Instant::now();
            // Phases check their ends at least every 50 ms; pacing wakes up every 200 us.
            let mut wake = now + Duration::from_millis(50);
            if let Some(at) = self.timers.next_at() {
                wake = wake.min(at);
            }
            if let Some((rate, start, sent, _)) = &self.pace {
                // The next paced send, but at most 5,000 wake-ups a second (they cost CPU too).
                let next = *start + Duration::from_secs_f64((*sent + 1) as f64 / rate);
                wake = wake.min(next.max(now + Duration::from_micros(200)));
            }
            let wait = wake.saturating_duration_since(now);
            let timeout = libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as _,
            };
            let n = unsafe {
                libc::epoll_pwait2(
                    self.epoll,
                    events.as_mut_ptr(),
                    MAX_EVENTS as i32,
                    &timeout,
                    std::ptr::null(),
                )
            };
            for ev in &events[..n.max(0) as usize] {
                if ev.u64 == u64::MAX {
                    self.read_stdin();
                    continue;
                }
                let (c, serial) = heartbeat_driver::socket::event_source(ev.u64);
                self.on_event(c, serial, ev.events);
            }
            self.fire_timers();
            self.paced_sends();
            self.tick(Instant::now());
            if n > 1 {
                std::thread::sleep(BATCH); // (a lone event: low load, where batching saves nothing)
            }
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some((i, token)) = self.timers.pop_due(now) {
            let i = i as usize;
            let m = &mut self.members[i];
            if m.timer_token != token {
                continue;
            }
            match std::mem::replace(&mut m.timer, Timer::None) {
                Timer::None => {}
                Timer::Heartbeat => self.heartbeat_due(i),
                Timer::Retry => self.retry(i),
                // (A timeout left over from a request failed otherwise must not close a shared connection.)
                Timer::Timeout if self.members[i].in_flight.is_some() => self.timed_out(i),
                Timer::Timeout => {}
                Timer::Rejoin => self.start_join(i),
            }
        }
    }

    pub fn set_timer(&mut self, i: usize, timer: Timer, at: Instant) {
        let m = &mut self.members[i];
        m.timer = timer;
        m.timer_token += 1;
        self.timers.push(at, i as u32, m.timer_token);
    }

    pub fn cancel_timer(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.timer = Timer::None;
        m.timer_token += 1;
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.rng.uniform()
    }

    /// A random Kafka Uuid as the Java client prints it (URL-safe base64, no padding).
    pub fn new_member_id(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut x = (self.rng.next_u64() as u128) << 64 | self.rng.next_u64() as u128;
        let mut id = String::with_capacity(22);
        for _ in 0..22 {
            id.push(ALPHABET[(x & 63) as usize] as char);
            x >>= 6;
        }
        id
    }
}

fn parse_args() -> Result<Config, String> {
    let opts = Options::from_env()?;
    let members: usize = opts.num("members", None)?;
    let members_per_connection: usize = opts.num("members-per-connection", Some(1))?;
    if members_per_connection == 0 {
        return Err("--members-per-connection must be positive".into());
    }
    let sources = match opts.num::<usize>("sources", Some(0))? {
        0 => members
            .div_ceil(members_per_connection)
            .div_ceil(CONNECTIONS_PER_SOURCE)
            .max(1),
        n => n,
    };
    let cfg = Config {
        port: opts.num("port", None)?,
        members,
        group: opts.get("group").ok_or("--group is required")?.to_string(),
        topics: opts
            .get("topics")
            .ok_or("--topics NAME,... is required")?
            .split(',')
            .map(String::from)
            .collect(),
        partitions: opts.num("partitions", None)?,
        // Java's max.poll.interval.ms default.
        rebalance_timeout_ms: opts.num("rebalance-timeout-ms", Some(300_000))?,
        server_assignor: opts
            .get("server-assignor")
            .map(|s| s.to_string())
            .filter(|s| !s.is_empty()),
        static_members: opts.num::<u8>("static", Some(0))? != 0,
        max_version: opts.num("max-version", Some(1))?,
        connects_in_flight: opts.num("connects-in-flight", Some(500))?,
        members_per_connection,
        sources: sources.min(254),
        first_source: opts.num::<usize>("first-source", Some(0))?.min(253),
        request_timeout: Duration::from_millis(opts.num("request-timeout-ms", Some(30_000))?),
        session_timeout: Duration::from_millis(opts.num("session-timeout-ms", Some(45_000))?),
        commands: opts.get("commands").map(|c| {
            c.split(';')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        }),
    };
    if cfg.members == 0 || cfg.connects_in_flight == 0 || cfg.members >= u32::MAX as usize {
        return Err("--members and --connects-in-flight must be positive".into());
    }
    Ok(cfg)
}

/// One descriptor per connection: raise the soft limit to the hard one (and the hard one if allowed).
fn raise_nofile(wanted: usize) {
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let want = wanted as libc::rlim_t;
    if lim.rlim_max < want {
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: want,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return;
        }
    }
    lim.rlim_cur = lim.rlim_max;
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    if lim.rlim_max < want {
        eprintln!(
            "consumer-driver: RLIMIT_NOFILE is {}, below the {wanted} descriptors wanted",
            lim.rlim_max
        );
    }
}
