//! The rate-limited reports of the network thread: connections refused over a limit, accept()
//! failures and failed TLS handshakes are counted, and queued for Python to log at most every
//! REPORT_INTERVAL, one line per kind (and per address, up to a bound), with the counts.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;

use super::queues::Inbound;
use super::Network;
use crate::network::limits::Reports;

/// Addresses named in one round of reports; further ones are counted together.
const MAX_REPORTED_ADDRESSES: usize = 32;

/// What the rate-limited reports count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Report {
    OverMaxConnections,
    OverPerIp(IpAddr),
    /// Over max.connections.per.ip, from addresses beyond MAX_REPORTED_ADDRESSES.
    OverPerIpElsewhere,
    /// accept() failed with this errno.
    AcceptFailed(i32),
    /// Out of descriptors: accepted on the spare descriptor and closed.
    RefusedNoFd,
    /// A TLS handshake (or record) failed: expired or untrusted certificate, not TLS at all...
    TlsFailed(IpAddr),
    /// The same, from addresses beyond MAX_REPORTED_ADDRESSES.
    TlsFailedElsewhere,
}

/// `named` (a report about one address) while it is counted already or fewer than
/// MAX_REPORTED_ADDRESSES kinds are, else `elsewhere`: many addresses share one line.
pub(super) fn named_or_elsewhere(
    reports: &Reports<Report>,
    named: Report,
    elsewhere: Report,
) -> Report {
    if reports.counts(&named) || reports.kinds() < MAX_REPORTED_ADDRESSES {
        named
    } else {
        elsewhere
    }
}

/// The line logged for `n` of `report`; a failed TLS's last reason is taken from `tls_failures`.
fn message(
    report: Report,
    n: u64,
    max_connections: usize,
    max_per_ip: Option<usize>,
    tls_failures: &mut HashMap<IpAddr, String>,
) -> String {
    let s = if n == 1 { "" } else { "s" };
    match report {
        Report::OverMaxConnections => {
            format!(
                "refused {n} connection{s} over max.connections={}",
                max_connections
            )
        }
        Report::OverPerIp(ip) => format!(
            "refused {n} connection{s} over max.connections.per.ip={} from /{ip}",
            max_per_ip.unwrap_or(usize::MAX)
        ),
        Report::OverPerIpElsewhere => format!(
            "refused {n} connection{s} over max.connections.per.ip={} from other addresses",
            max_per_ip.unwrap_or(usize::MAX)
        ),
        Report::AcceptFailed(errno) => format!(
            "accepting connections failed {n} time{s}: {}",
            io::Error::from_raw_os_error(errno)
        ),
        Report::TlsFailed(ip) => format!(
            "closed {n} connection{s} from /{ip} for failed TLS (last: {})",
            tls_failures.remove(&ip).unwrap_or_default()
        ),
        Report::TlsFailedElsewhere => {
            format!("closed {n} connection{s} from other addresses for failed TLS")
        }
        Report::RefusedNoFd => format!(
            "refused {n} connection{s} for want of file descriptors (closed at once on a spare \
             descriptor); raise RLIMIT_NOFILE or lower max.connections"
        ),
    }
}

impl Network {
    pub(super) fn note_tls_failure(&mut self, ip: IpAddr, reason: String) {
        let report = named_or_elsewhere(
            &self.reports,
            Report::TlsFailed(ip),
            Report::TlsFailedElsewhere,
        );
        if report == Report::TlsFailed(ip) {
            self.tls_failures.insert(ip, reason);
        }
        self.reports.note(report);
    }

    /// Queues the rate-limited reports for Python when they are due.
    pub(super) fn report(&mut self) {
        if !self.reports.pending() {
            return;
        }
        let Some(counts) = self.reports.take_due(self.now) else {
            return;
        };
        for (report, n) in counts {
            let message = message(
                report,
                n,
                self.limits.max_connections,
                self.per_ip.max(),
                &mut self.tls_failures,
            );
            self.for_python.push(Inbound::Notice(message));
        }
        // Every address counted was named above.
        self.tls_failures.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([192, 168, 0, last])
    }

    #[test]
    fn addresses_are_named_up_to_a_bound() {
        let mut reports = Reports::new(Duration::from_secs(10));
        for last in 0..MAX_REPORTED_ADDRESSES as u8 {
            let report = named_or_elsewhere(
                &reports,
                Report::TlsFailed(ip(last)),
                Report::TlsFailedElsewhere,
            );
            assert_eq!(report, Report::TlsFailed(ip(last)));
            reports.note(report);
        }
        let late = Report::OverPerIp(ip(200));
        assert_eq!(
            named_or_elsewhere(&reports, late, Report::OverPerIpElsewhere),
            Report::OverPerIpElsewhere
        );
        // An address counted already keeps its own line.
        let known = Report::TlsFailed(ip(3));
        assert_eq!(
            named_or_elsewhere(&reports, known, Report::TlsFailedElsewhere),
            known
        );
    }

    #[test]
    fn messages_name_the_limit_and_the_count() {
        let mut failures = HashMap::new();
        assert_eq!(
            message(Report::OverMaxConnections, 1, 100, None, &mut failures),
            "refused 1 connection over max.connections=100"
        );
        assert_eq!(
            message(Report::OverPerIp(ip(7)), 3, 100, Some(5), &mut failures),
            "refused 3 connections over max.connections.per.ip=5 from /192.168.0.7"
        );
        assert_eq!(
            message(Report::OverPerIpElsewhere, 2, 100, Some(5), &mut failures),
            "refused 2 connections over max.connections.per.ip=5 from other addresses"
        );
        failures.insert(ip(9), "bad certificate".to_string());
        assert_eq!(
            message(Report::TlsFailed(ip(9)), 4, 100, None, &mut failures),
            "closed 4 connections from /192.168.0.9 for failed TLS (last: bad certificate)"
        );
        assert!(failures.is_empty());
        assert!(message(
            Report::AcceptFailed(libc::EMFILE),
            2,
            1,
            None,
            &mut failures
        )
        .starts_with("accepting connections failed 2 times: "));
        assert!(message(Report::RefusedNoFd, 1, 1, None, &mut failures)
            .starts_with("refused 1 connection for want of file descriptors"));
    }
}
