//! Non-blocking TCP connections to a broker on loopback, driven by epoll: opening them, sending
//! what they take, reading what they have (with the kernel's receive times), splitting frames.

use crate::sys::{check, set_int_option};
use std::collections::VecDeque;
use std::io;

pub fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_be_bytes(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

pub const SOCKADDR_SIZE: libc::socklen_t =
    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// A non-blocking TCP socket with TCP_NODELAY (requests are small and each waits for its answer).
pub fn tcp_socket() -> io::Result<i32> {
    let fd = check(unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    let _ = set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    Ok(fd)
}

/// Starts connecting fd to 127.0.0.1:port; epoll says when it is done (EPOLLOUT, then SO_ERROR).
pub fn start_connect(fd: i32, port: u16) -> io::Result<()> {
    let addr = sockaddr([127, 0, 0, 1], port);
    let ret = unsafe {
        libc::connect(
            fd,
            (&addr as *const libc::sockaddr_in).cast(),
            SOCKADDR_SIZE,
        )
    };
    if ret < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINPROGRESS) {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a connect that epoll reported done has succeeded.
pub fn connected(fd: i32) -> bool {
    crate::sys::get_int_option(fd, libc::SOL_SOCKET, libc::SO_ERROR).unwrap_or(-1) == 0
}

/// Takes the socket off epoll and closes it.
pub fn close(epoll: i32, fd: i32) {
    unsafe {
        libc::epoll_ctl(epoll, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut());
        libc::close(fd);
    }
}

/// An epoll event's u64 for connection `index`'s socket number `serial`: the serial tells an
/// event of a socket closed earlier in the same batch from one of its successor.
pub fn event_data(index: usize, serial: u32) -> u64 {
    index as u64 | (serial as u64) << 32
}

/// (index, serial) back from an event's u64.
pub fn event_source(data: u64) -> (usize, u32) {
    ((data & 0xffff_ffff) as usize, (data >> 32) as u32)
}

/// At most `limit` connections opening (connect, then the ApiVersions handshake) at once, the
/// others waiting in line, as corral load's connect slots and the Java client's storms of
/// reconnects are bounded.
pub struct ConnectSlots {
    limit: usize,
    used: usize,
    line: VecDeque<usize>,
}

impl ConnectSlots {
    pub fn new(limit: usize) -> ConnectSlots {
        ConnectSlots {
            limit,
            used: 0,
            line: VecDeque::new(),
        }
    }

    pub fn available(&self) -> bool {
        self.used < self.limit
    }

    /// A connection starts opening: it holds a slot until its handshake is done or it fails.
    pub fn take(&mut self) {
        self.used += 1;
    }

    pub fn wait(&mut self, connection: usize) {
        self.line.push_back(connection);
    }

    pub fn leave_line(&mut self, connection: usize) {
        self.line.retain(|&c| c != connection);
    }

    pub fn give_back(&mut self) {
        self.used -= 1;
    }

    /// The next connection in line, if a slot is free for it.
    pub fn next_in_line(&mut self) -> Option<usize> {
        if self.available() {
            self.line.pop_front()
        } else {
            None
        }
    }
}

/// epoll_ctl with the events and the u64 the drivers tell their sockets apart by.
pub fn epoll_set(epoll: i32, op: i32, fd: i32, events: i32, data: u64) -> i32 {
    let mut ev = libc::epoll_event {
        events: events as u32,
        u64: data,
    };
    unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) }
}

/// What a connection has still to send, and whether it waits for EPOLLOUT to send the rest.
#[derive(Default)]
pub struct Outbox {
    buf: Vec<u8>,
    pos: usize,
    pub polling_out: bool,
}

impl Outbox {
    /// Queues the frame behind what has not been sent yet.
    pub fn push(&mut self, frame: Vec<u8>) {
        if self.pos == self.buf.len() {
            self.buf = frame;
            self.pos = 0;
        } else {
            self.buf.extend_from_slice(&frame);
        }
    }

    /// Sends what the socket takes. Ok(Some(events)): the connection's epoll interest must become
    /// `events` (EPOLLOUT added while the send buffer is full, dropped once all is sent).
    /// Err: the connection is broken.
    pub fn flush(&mut self, fd: i32) -> io::Result<Option<i32>> {
        while self.pos < self.buf.len() {
            let rest = &self.buf[self.pos..];
            let n = unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n >= 0 {
                self.pos += n as usize;
                continue;
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) => {
                    if self.polling_out {
                        return Ok(None);
                    }
                    self.polling_out = true;
                    return Ok(Some(libc::EPOLLIN | libc::EPOLLOUT));
                }
                _ => return Err(error),
            }
        }
        self.buf = Vec::new();
        self.pos = 0;
        if self.polling_out {
            self.polling_out = false;
            return Ok(Some(libc::EPOLLIN));
        }
        Ok(None)
    }
}

/// One recvmsg into `buf`: its result, and the kernel's receive time of the data (CLOCK_REALTIME
/// ns) if the socket has SO_TIMESTAMPNS on (`control` receives it).
pub fn recv_stamped(fd: i32, buf: &mut [u8], control: &mut [u64; 16]) -> (isize, Option<i64>) {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(control);
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    (n, if n > 0 { receive_timestamp(&msg) } else { None })
}

/// Reads all the socket has now (until a read shorter than `buf`, or EAGAIN), handing each read's
/// data to `got` with the kernel's receive time of it (None without SO_TIMESTAMPNS).
/// Err: the peer closed the connection or it broke.
pub fn read_available(
    fd: i32,
    buf: &mut [u8],
    control: &mut [u64; 16],
    mut got: impl FnMut(&[u8], Option<i64>),
) -> io::Result<()> {
    loop {
        let (n, stamp) = recv_stamped(fd, buf, control);
        if n > 0 {
            got(&buf[..n as usize], stamp);
            if (n as usize) < buf.len() {
                return Ok(());
            }
            continue;
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(()),
            _ => return Err(error),
        }
    }
}

/// A frame size no response can have: the stream is broken.
#[derive(Debug, PartialEq, Eq)]
pub struct BrokenStream(pub i32);

/// The end of the size-prefixed frame at `pos` of `buf` once all of it is there (None: not yet).
/// Err: a size below a response header's 4 bytes or above `max`, a broken stream.
pub fn frame_end(buf: &[u8], pos: usize, max: usize) -> Result<Option<usize>, BrokenStream> {
    if buf.len() - pos < 4 {
        return Ok(None);
    }
    let size = i32::from_be_bytes(buf[pos..pos + 4].try_into().unwrap());
    if size < 4 || size as usize > max {
        return Err(BrokenStream(size));
    }
    let end = pos + 4 + size as usize;
    Ok((buf.len() >= end).then_some(end))
}

/// The kernel's receive time (SCM_TIMESTAMPNS, CLOCK_REALTIME ns) of the data a recvmsg returned.
fn receive_timestamp(msg: &libc::msghdr) -> Option<i64> {
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        let header = unsafe { &*cmsg };
        if header.cmsg_level == libc::SOL_SOCKET && header.cmsg_type == libc::SCM_TIMESTAMPNS {
            let ts: libc::timespec =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            return Some(ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64);
        }
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{frame_end, BrokenStream};

    #[test]
    fn frames_end_where_their_size_says_once_all_there() {
        let buf = [0, 0, 0, 4, 1, 2, 3, 4, 0, 0, 0, 5, 9];
        assert_eq!(frame_end(&buf, 0, 100), Ok(Some(8)));
        assert_eq!(frame_end(&buf, 8, 100), Ok(None));
        assert_eq!(frame_end(&buf[..3], 0, 100), Ok(None));
        assert_eq!(frame_end(&[0, 0, 0, 3], 0, 100), Err(BrokenStream(3)));
        assert_eq!(frame_end(&buf, 0, 3), Err(BrokenStream(4)));
    }
}
