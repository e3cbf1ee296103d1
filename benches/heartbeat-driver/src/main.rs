//! The sending half of benches/heartbeat_capacity.py's step() without the Python interpreter:
//! ~1 us of user-space CPU per heartbeat; the rest is the kernel's loopback TCP work (sending a
//! segment also runs the receiving side's TCP input and wake-up), which any driver pays.
//!
//! Python joins the members and hands over their connected sockets as inherited file descriptors
//! (subprocess `pass_fds`), with the exact frame each one sends. This program then sends those
//! frames at a paced rate (`due = elapsed * rate - sent`, to members from a FIFO of idle ones,
//! at most one request in flight per socket), reads answers with epoll and times each of them.
//!
//! Input on stdin, text:
//!     RATE SECONDS
//!     FD FRAME_HEX          (one line per member: the whole frame, size prefix included)
//! Output on stdout: `started` when the paced phase begins, one JSON line when it ends
//! (achieved, p50_ms, p99_ms, max_ms, errors {code: count}, driver_cpu and its user-space part
//! driver_user_cpu, in cores, driver_us_per_answer, ...), then the program
//! waits up to 2 s for answers still in flight so the sockets are idle for the next step.
//! It restores each socket's file status flags (blocking) before exiting and never closes them
//! explicitly: the parent keeps its own descriptors.
//!
//! Sleeping: the paced phase does not wait in epoll, so answers never wake it (a wake-up per
//! answer cost this VM 4-6 us of driver CPU, and the broker the IPI to deliver it). It sleeps
//! (nanosleep) until the next send is due but at least `TICK`, then collects what arrived with a
//! non-blocking epoll_wait and sends what is due: at 40,000/s, bursts of ~8 every 200 us.
//! Latency is still exact: each answer is timed by the kernel's receive timestamp (SO_TIMESTAMPNS,
//! CLOCK_REALTIME) against the CLOCK_REALTIME read just before its request's send(); a member only
//! becomes idle again at the next tick (<= 200 us later), which bounds nothing as long as
//! members / rate is well above TICK (2,000 members at 40,000/s: 50 ms per member).

use heartbeat_driver::socket::recv_stamped;
use heartbeat_driver::sys::{check, cpu_seconds, get_int_option, realtime_ns, set_int_option};
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::process::exit;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_micros(200);
const DRAIN: Duration = Duration::from_secs(2);
const READ_BUF: usize = 64 * 1024;
const MAX_EVENTS: usize = 1024;
/// Heartbeat v4 response: correlation id (4), header tagged fields (1), throttle time (4), error code.
const ERROR_CODE_OFFSET: usize = 4 + 1 + 4;

struct Member {
    fd: i32,
    frame: Vec<u8>,
    flags: i32,
    /// CLOCK_REALTIME ns, the clock of the kernel's receive timestamps (SO_TIMESTAMPNS).
    sent_at: i64,
    timestamps: i32,
    in_flight: bool,
    open: bool,
    buf: Vec<u8>,
}

struct Stats {
    latencies_ns: Vec<u64>,
    errors: BTreeMap<String, u64>,
    closed: u64,
}

struct Driver {
    epoll: i32,
    members: Vec<Member>,
    idle: VecDeque<usize>,
    in_flight: usize,
    read_buf: Vec<u8>,
    control: [u64; 16],
    events: Vec<libc::epoll_event>,
}

fn main() {
    let (rate, seconds, members) = parse_input().unwrap_or_else(|e| {
        eprintln!("heartbeat-driver: bad input: {e}");
        exit(2)
    });
    let mut driver = Driver::new(members).unwrap_or_else(|e| {
        eprintln!("heartbeat-driver: setup: {e}");
        exit(1)
    });
    let mut stats = Stats {
        latencies_ns: Vec::new(),
        errors: BTreeMap::new(),
        closed: 0,
    };
    let mut out = io::stdout().lock();
    writeln!(out, "started")
        .and_then(|_| out.flush())
        .expect("stdout");

    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut sent: u64 = 0;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        driver.harvest(&mut stats);
        let mut due = (((now - start).as_secs_f64() * rate) as u64).saturating_sub(sent);
        while due > 0 {
            let Some(i) = driver.idle.pop_front() else {
                break;
            };
            if driver.send(i, &mut stats) {
                sent += 1;
                due -= 1;
            }
        }
        let next_due = start + Duration::from_secs_f64((sent + 1) as f64 / rate);
        std::thread::sleep(
            next_due
                .saturating_duration_since(now)
                .max(TICK)
                .min(end - now),
        );
    }
    driver.harvest(&mut stats); // what arrived during the last sleep
    let elapsed = start.elapsed().as_secs_f64();
    let cpu_end = cpu_seconds();
    let cpu = (
        cpu_end.user - cpu_start.user,
        cpu_end.total() - cpu_start.total(),
    );
    writeln!(out, "{}", report(&mut stats, sent, elapsed, cpu))
        .and_then(|_| out.flush())
        .expect("stdout");

    // Let answers in flight arrive (untimed) so that the sockets are idle for the next step.
    let deadline = Instant::now() + DRAIN;
    while driver.in_flight > 0 {
        let now = Instant::now();
        if now >= deadline {
            eprintln!(
                "heartbeat-driver: {} answers still in flight after {DRAIN:?}",
                driver.in_flight
            );
            break;
        }
        driver.poll((deadline - now).min(Duration::from_millis(10)), &mut stats);
    }
    driver.restore();
}

impl Driver {
    fn new(members: Vec<Member>) -> io::Result<Driver> {
        let epoll = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        let mut driver = Driver {
            epoll,
            idle: (0..members.len()).collect(),
            members,
            in_flight: 0,
            read_buf: vec![0; READ_BUF],
            control: [0; 16],
            events: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS],
        };
        for (i, m) in driver.members.iter_mut().enumerate() {
            m.flags = check(unsafe { libc::fcntl(m.fd, libc::F_GETFL) })?;
            check(unsafe { libc::fcntl(m.fd, libc::F_SETFL, m.flags | libc::O_NONBLOCK) })?;
            m.timestamps = get_int_option(m.fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)?;
            set_int_option(m.fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: i as u64,
            };
            check(unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, m.fd, &mut ev) })?;
        }
        Ok(driver)
    }

    /// Sends member i's frame; false (and the member is dropped) if its connection is gone.
    fn send(&mut self, i: usize, stats: &mut Stats) -> bool {
        let m = &mut self.members[i];
        // Before send(): on loopback the answer can be queued before send() returns.
        let sent_at = realtime_ns();
        let mut pos = 0;
        while pos < m.frame.len() {
            let rest = &m.frame[pos..];
            let n =
                unsafe { libc::send(m.fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n >= 0 {
                pos += n as usize;
                continue;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => {}
                // A send buffer full with one small request in flight: rare, so just wait for room.
                Some(libc::EAGAIN) => {
                    let mut pfd = libc::pollfd {
                        fd: m.fd,
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    unsafe { libc::poll(&mut pfd, 1, 100) };
                }
                _ => {
                    self.close(i, stats);
                    return false;
                }
            }
        }
        m.sent_at = sent_at;
        m.in_flight = true;
        self.in_flight += 1;
        true
    }

    /// Handles the answers that arrived since the last call, without waiting.
    fn harvest(&mut self, stats: &mut Stats) {
        loop {
            let n = unsafe {
                libc::epoll_wait(self.epoll, self.events.as_mut_ptr(), MAX_EVENTS as i32, 0)
            };
            for k in 0..n.max(0) as usize {
                let i = self.events[k].u64 as usize;
                self.read(i, stats, true);
            }
            if n < MAX_EVENTS as i32 {
                return;
            }
        }
    }

    /// Waits up to `wait` for answers and handles them, untimed (after the paced phase).
    fn poll(&mut self, wait: Duration, stats: &mut Stats) {
        let timeout = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as _,
        };
        let n = unsafe {
            libc::epoll_pwait2(
                self.epoll,
                self.events.as_mut_ptr(),
                MAX_EVENTS as i32,
                &timeout,
                std::ptr::null(),
            )
        };
        for k in 0..n.max(0) as usize {
            let i = self.events[k].u64 as usize;
            self.read(i, stats, false);
        }
    }

    fn read(&mut self, i: usize, stats: &mut Stats, timed: bool) {
        let m = &mut self.members[i];
        if !m.open {
            return;
        }
        let (n, stamp) = recv_stamped(m.fd, &mut self.read_buf, &mut self.control);
        if n < 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => return,
                _ => return self.close(i, stats),
            }
        }
        if n == 0 {
            return self.close(i, stats);
        }
        let received_at = stamp.unwrap_or_else(realtime_ns);
        m.buf.extend_from_slice(&self.read_buf[..n as usize]);
        let mut pos = 0;
        while m.buf.len() - pos >= 4 {
            let size = i32::from_be_bytes(m.buf[pos..pos + 4].try_into().unwrap());
            if size < 0 {
                return self.close(i, stats);
            }
            let size = size as usize;
            if m.buf.len() - pos < 4 + size {
                break;
            }
            let frame = &m.buf[pos + 4..pos + 4 + size];
            if m.in_flight {
                m.in_flight = false;
                self.in_flight -= 1;
                self.idle.push_back(i);
                if timed {
                    let code = match frame.get(ERROR_CODE_OFFSET..ERROR_CODE_OFFSET + 2) {
                        Some(b) => i16::from_be_bytes([b[0], b[1]]).to_string(),
                        None => "short_frame".to_string(),
                    };
                    *stats.errors.entry(code).or_default() += 1;
                    stats
                        .latencies_ns
                        .push((received_at - m.sent_at).max(0) as u64);
                }
            }
            pos += 4 + size;
        }
        m.buf.drain(..pos);
    }

    /// A connection the broker closed (or broke): stop using it. Its fd stays open (the parent's).
    fn close(&mut self, i: usize, stats: &mut Stats) {
        let m = &mut self.members[i];
        if !m.open {
            return;
        }
        m.open = false;
        stats.closed += 1;
        unsafe { libc::epoll_ctl(self.epoll, libc::EPOLL_CTL_DEL, m.fd, std::ptr::null_mut()) };
        if m.in_flight {
            m.in_flight = false;
            self.in_flight -= 1;
        }
        self.idle.retain(|&j| j != i);
    }

    /// The file status flags are shared with the parent's descriptors: give them back as found.
    fn restore(&self) {
        for m in &self.members {
            unsafe { libc::fcntl(m.fd, libc::F_SETFL, m.flags) };
            let _ = set_int_option(m.fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, m.timestamps);
        }
    }
}

/// `cpu`: (user, user + system) seconds over the paced phase.
fn report(stats: &mut Stats, sent: u64, elapsed: f64, (user, cpu): (f64, f64)) -> String {
    let lat = &mut stats.latencies_ns;
    lat.sort_unstable();
    let pick = |q: f64| -> String {
        if lat.is_empty() {
            return "null".into();
        }
        let ns = lat[((q * lat.len() as f64) as usize).min(lat.len() - 1)];
        format!("{:.2}", ns as f64 / 1e6)
    };
    let max_ms = lat
        .last()
        .map_or("null".into(), |&ns| format!("{:.2}", ns as f64 / 1e6));
    let errors: Vec<String> = stats
        .errors
        .iter()
        .map(|(code, n)| format!("\"{code}\":{n}"))
        .collect();
    let answers = lat.len();
    let us_per_answer = if answers > 0 {
        format!("{:.2}", cpu * 1e6 / answers as f64)
    } else {
        "null".into()
    };
    format!(
        "{{\"achieved\":{},\"sent\":{sent},\"answers\":{answers},\"elapsed\":{elapsed:.3},\"p50_ms\":{},\"p99_ms\":{},\
         \"max_ms\":{max_ms},\"errors\":{{{}}},\"driver_cpu\":{:.3},\"driver_user_cpu\":{:.3},\"driver_us_per_answer\":{us_per_answer},\"closed\":{}}}",
        (answers as f64 / elapsed).round(),
        pick(0.5),
        pick(0.99),
        errors.join(","),
        cpu / elapsed,
        user / elapsed,
        stats.closed
    )
}

fn parse_input() -> Result<(f64, f64, Vec<Member>), String> {
    let mut text = String::new();
    io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let mut lines = text.lines();
    let head: Vec<f64> = lines
        .next()
        .ok_or("empty input")?
        .split_whitespace()
        .map(|x| x.parse::<f64>().map_err(|e| format!("{x}: {e}")))
        .collect::<Result<_, _>>()?;
    let [rate, seconds] = head[..] else {
        return Err("first line must be: RATE SECONDS".into());
    };
    if !(rate > 0.0 && seconds > 0.0) {
        return Err("RATE and SECONDS must be positive".into());
    }
    let mut members = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let (fd, hex) = line
            .trim()
            .split_once(' ')
            .ok_or_else(|| format!("expected FD FRAME_HEX: {line}"))?;
        let fd: i32 = fd.parse().map_err(|e| format!("fd {fd}: {e}"))?;
        let frame = unhex(hex.trim()).ok_or_else(|| format!("frame of fd {fd} is not hex"))?;
        members.push(Member {
            fd,
            frame,
            flags: 0,
            timestamps: 0,
            sent_at: 0,
            in_flight: false,
            open: true,
            buf: Vec::new(),
        });
    }
    if members.is_empty() {
        return Err("no members".into());
    }
    Ok((rate, seconds, members))
}

fn unhex(hex: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}
