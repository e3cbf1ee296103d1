//! Thin wrappers of the system calls the drivers make: socket options, clocks, CPU time.

use std::io;

/// A libc return value as a Result: negative is the error in errno.
pub fn check(ret: i32) -> io::Result<i32> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub fn get_int_option(fd: i32, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    check(unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) })?;
    Ok(value)
}

pub fn set_int_option(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    let size = std::mem::size_of::<i32>() as libc::socklen_t;
    check(unsafe { libc::setsockopt(fd, level, name, (&value as *const i32).cast(), size) })
        .map(|_| ())
}

pub fn set_nonblocking(fd: i32) -> io::Result<()> {
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(|_| ())
}

/// CLOCK_REALTIME in ns: the clock of the kernel's receive timestamps (SO_TIMESTAMPNS), so that
/// a request's send time and its answer's receive time can be subtracted.
pub fn realtime_ns() -> i64 {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64
}

/// This process's CPU seconds so far.
#[derive(Clone, Copy)]
pub struct CpuTimes {
    pub user: f64,
    pub system: f64,
}

impl CpuTimes {
    pub fn total(&self) -> f64 {
        self.user + self.system
    }
}

pub fn cpu_seconds() -> CpuTimes {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    CpuTimes {
        user: secs(usage.ru_utime),
        system: secs(usage.ru_stime),
    }
}
