//! join-storm's connections: one per member, at most --connects-in-flight connecting (and in
//! their ApiVersions handshake) at once, a request at a time on each, answers split off by hand.

use crate::protocol as p;
use crate::{check_versions, Api, Conn, Storm, Timer, CLIENT_ID, MAX_FRAME, NONE};
use heartbeat_driver::socket::{self, Outbox};
use std::time::{Duration, Instant};

impl Storm {
    pub(crate) fn request(&mut self, i: usize, api: Api, frame: Vec<u8>, timeout: Duration) {
        *self.requests.entry(api.name()).or_default() += 1;
        self.members[i].in_flight = Some(api);
        self.set_timer(i, Timer::Timeout, Instant::now() + timeout);
        match self.members[i].conn {
            Conn::Ready => self.transmit(i, frame),
            _ => {
                self.members[i].pending = Some(frame);
                self.want_connection(i);
            }
        }
    }

    fn transmit(&mut self, i: usize, frame: Vec<u8>) {
        let m = &mut self.members[i];
        m.expected = i32::from_be_bytes(frame[8..12].try_into().unwrap());
        if m.in_flight == Some(Api::Join) && m.conn == Conn::Ready && self.first_join_sent.is_none()
        {
            self.first_join_sent = Some(Instant::now());
        }
        m.out.push(frame);
        self.flush(i);
    }

    fn flush(&mut self, i: usize) {
        let m = &mut self.members[i];
        match m.out.flush(m.fd) {
            Ok(Some(events)) => self.interest(i, events),
            Ok(None) => {}
            Err(_) => self.fail(i, "CONNECTION"),
        }
    }

    fn want_connection(&mut self, i: usize) {
        if self.members[i].conn != Conn::Down {
            return;
        }
        if self.slots.available() {
            self.open(i);
        } else {
            self.members[i].conn = Conn::WaitingSlot;
            self.slots.wait(i);
        }
    }

    fn open(&mut self, i: usize) {
        let Ok(fd) = socket::tcp_socket() else {
            return self.fail(i, "CONNECTION");
        };
        self.connects += 1;
        let m = &mut self.members[i];
        m.fd = fd;
        m.serial = m.serial.wrapping_add(1);
        m.conn = Conn::Connecting;
        m.holds_slot = true;
        self.slots.take();
        if socket::start_connect(fd, self.cfg.port).is_err() {
            return self.fail(i, "CONNECTION");
        }
        if socket::epoll_set(
            self.epoll,
            libc::EPOLL_CTL_ADD,
            fd,
            libc::EPOLLOUT,
            self.event_data(i),
        ) < 0
        {
            self.fail(i, "CONNECTION");
        }
    }

    fn on_connected(&mut self, i: usize) {
        let fd = self.members[i].fd;
        if !socket::connected(fd) {
            return self.fail(i, "CONNECTION");
        }
        self.interest(i, libc::EPOLLIN);
        let m = &mut self.members[i];
        m.conn = Conn::Handshake;
        m.correlation += 1;
        // ApiVersions first, as every client (and corral load) does on a new connection.
        let frame = p::api_versions(m.correlation, CLIENT_ID);
        self.transmit(i, frame);
    }

    fn on_handshake(&mut self, i: usize, frame: &[u8]) {
        match p::api_versions_answer(frame) {
            Ok((NONE, apis)) => {
                if !self.versions_checked {
                    self.versions_checked = true;
                    check_versions(&apis);
                }
            }
            _ => return self.fail(i, "CONNECTION"),
        }
        let m = &mut self.members[i];
        m.conn = Conn::Ready;
        if !m.ever_connected {
            m.ever_connected = true;
            self.connected_members += 1;
            if self.connected_members == self.cfg.members {
                self.all_connected_at = Some(Instant::now());
            }
        }
        self.release_slot(i);
        if let Some(frame) = self.members[i].pending.take() {
            self.transmit(i, frame);
        }
    }

    fn release_slot(&mut self, i: usize) {
        if !std::mem::take(&mut self.members[i].holds_slot) {
            return;
        }
        self.slots.give_back();
        while let Some(j) = self.slots.next_in_line() {
            self.members[j].conn = Conn::Down;
            self.open(j);
        }
    }

    pub(crate) fn disconnect(&mut self, i: usize) {
        let m = &mut self.members[i];
        if m.conn == Conn::WaitingSlot {
            self.slots.leave_line(i);
        }
        if m.fd >= 0 {
            socket::close(self.epoll, m.fd);
        }
        m.fd = -1;
        m.conn = Conn::Down;
        m.out = Outbox::default();
        m.inbuf = Vec::new();
        self.release_slot(i);
    }

    pub(crate) fn on_event(&mut self, i: usize, serial: u32, flags: u32) {
        let m = &self.members[i];
        if m.serial != serial || m.fd < 0 {
            return; // an event of a connection closed earlier in this batch
        }
        if m.conn == Conn::Connecting {
            return self.on_connected(i);
        }
        if flags & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
            self.read(i);
        }
        let m = &self.members[i];
        if flags & libc::EPOLLOUT as u32 != 0
            && m.serial == serial
            && m.fd >= 0
            && m.out.polling_out
        {
            self.flush(i);
        }
    }

    fn read(&mut self, i: usize) {
        let serial = self.members[i].serial;
        let m = &mut self.members[i];
        let inbuf = &mut m.inbuf;
        if socket::read_available(m.fd, &mut self.read_buf, &mut self.control, |data, _| {
            inbuf.extend_from_slice(data)
        })
        .is_err()
        {
            return self.fail(i, "CONNECTION");
        }
        loop {
            let m = &mut self.members[i];
            if m.serial != serial || m.fd < 0 {
                return;
            }
            let end = match socket::frame_end(&m.inbuf, 0, MAX_FRAME) {
                Ok(Some(end)) => end,
                Ok(None) => return,
                Err(_) => return self.fail(i, "CONNECTION"),
            };
            let frame: Vec<u8> = m.inbuf.drain(..end).skip(4).collect();
            self.on_frame(i, &frame);
        }
    }

    fn on_frame(&mut self, i: usize, frame: &[u8]) {
        let m = &self.members[i];
        if p::correlation_id(frame) != Ok(m.expected) {
            return self.fail(i, "CONNECTION");
        }
        if m.conn == Conn::Handshake {
            return self.on_handshake(i, frame);
        }
        let Some(api) = m.in_flight else {
            return self.fail(i, "CONNECTION");
        };
        let outcome = match api {
            Api::Join => p::join_answer(frame).map(|a| (a.error, Some(a), None)),
            Api::Sync => p::sync_answer(frame).map(|(e, b)| (e, None, Some(b))),
            Api::Heartbeat => p::heartbeat_answer(frame).map(|e| (e, None, None)),
        };
        let Ok((error, join, sync)) = outcome else {
            eprintln!("join-storm: undecodable {} answer", api.name());
            return self.fail(i, "CONNECTION");
        };
        let m = &mut self.members[i];
        m.in_flight = None;
        m.timer = Timer::None; // its timeout
        if error != NONE {
            *self
                .errors
                .entry(format!("{}:{error}", api.name()))
                .or_default() += 1;
        }
        match api {
            Api::Join => self.on_join(i, join.unwrap()),
            Api::Sync => self.on_sync(i, error, &sync.unwrap()),
            Api::Heartbeat => self.on_heartbeat(i, error),
        }
    }

    fn event_data(&self, i: usize) -> u64 {
        socket::event_data(i, self.members[i].serial)
    }

    fn interest(&mut self, i: usize, events: i32) {
        socket::epoll_set(
            self.epoll,
            libc::EPOLL_CTL_MOD,
            self.members[i].fd,
            events,
            self.event_data(i),
        );
    }
}
