//! A connection's I/O on the network thread: reading what its socket has (within the read-ahead
//! and the queued-bytes pool), serving its frames (answered by the core, taken by a short path,
//! or queued for Python, one at a time), writing its answers, and ending it.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Read, Write};
use std::sync::atomic::Ordering;

use bytes::{Buf, Bytes};

use super::queues::Inbound;
use super::{End, Network, Refusal};
use crate::codec::requests::{self, Routed};
use crate::network::client_socket::OUT_LIMIT;
use crate::network::limits::Allow;
use crate::short_paths::commit_path::Took;

const API_VERSIONS: i16 = 18;

impl Network {
    pub(super) fn end(&mut self, id: u64, end: End) {
        if let Some(mut conn) = self.connections.remove(&id) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if self.pool.limited() && conn.budget.release(&mut self.pool) {
                self.pool_freed = true;
            }
            self.per_ip.release(conn.ip);
            if conn.watched {
                self.for_python.push(Inbound::Closed(id));
            }
            if let End::Refused(kind, reason) = end {
                self.for_python.push(Inbound::Refused {
                    kind,
                    peer: conn.peer.clone(),
                    client_host: conn.client_host.clone(),
                    reason,
                });
            }
        }
    }

    /// Reads what the socket has, up to the read-ahead bound and while the pool allows.
    pub(super) fn read(&mut self, id: u64) {
        let chunk = &mut self.read_buffer;
        let Some(conn) = self.connections.get_mut(&id) else {
            return;
        };
        conn.unread = false;
        loop {
            if !conn.may_read() {
                conn.unread = true;
                return;
            }
            let limit = match conn
                .budget
                .allowance(&self.pool, conn.frames.head(), chunk.len())
            {
                Allow::Read(n) => n,
                Allow::Wait(lane) => {
                    // The bytes stay in the socket; resume_waiting reads them.
                    conn.unread = true;
                    if !conn.pool_waiting {
                        conn.pool_waiting = true;
                        self.waiting[lane as usize].push_back(id);
                    }
                    return;
                }
            };
            let got = match conn.tls.as_mut() {
                None => conn.stream.read(&mut chunk[..limit]),
                Some(tls) => {
                    let got = tls.read(&mut conn.stream, &mut chunk[..limit]);
                    let listener = &self.listeners[conn.listener];
                    // On SASL_SSL the principal is SASL's, as in Kafka.
                    if let (Some(Some(dn)), false, Some(config)) =
                        (tls.peer_subject(), listener.sasl, &listener.tls)
                    {
                        match config.principal_mapper.name(&dn) {
                            Ok(name) => conn.principal = format!("User:{name}").into(),
                            Err(e) => {
                                // Kafka closes such a connection at its first request.
                                let ip = conn.ip;
                                self.note_tls_failure(ip, e);
                                return self.end(id, End::Closed);
                            }
                        }
                    }
                    got
                }
            };
            match got {
                Ok(0) => return self.end(id, End::Closed),
                Ok(n) => {
                    conn.frames.push(&chunk[..n]);
                    conn.last_active = self.now;
                    if conn.partial_since.is_none() {
                        conn.partial_since = Some(self.now);
                    }
                    self.pool_freed |= conn.recharge(&mut self.pool);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    // A failed TLS handshake or record: send rustls's alert, then close. Counted,
                    // not logged one by one: a client retrying a bad certificate would flood.
                    if let Some(tls) = conn.tls.as_mut() {
                        let _ = tls.flush(&mut conn.stream, &mut VecDeque::new());
                    }
                    let ip = conn.ip;
                    self.note_tls_failure(ip, e.to_string());
                    return self.end(id, End::Closed);
                }
                Err(_) => return self.end(id, End::Closed),
            }
        }
    }

    /// Handles the connection's frames while it may, then writes what it has to say.
    pub(super) fn serve(&mut self, id: u64) {
        loop {
            let Some(conn) = self.connections.get_mut(&id) else {
                return;
            };
            if !conn.may_process() {
                break;
            }
            let frame = match conn.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    if conn.unread && conn.may_read() && !conn.pool_waiting {
                        self.read(id);
                        continue;
                    }
                    break;
                }
                Err(e) => return self.end(id, End::Refused(Refusal::Malformed, e.to_string())),
            };
            conn.partial_since = if conn.frames.buffered() > 0 {
                Some(self.now)
            } else {
                None
            };
            // What it waited for may have changed: the next read attempt decides again.
            conn.pool_waiting = false;
            match requests::route(self.table.get(), frame) {
                Err(reason) => return self.end(id, End::Refused(Refusal::Malformed, reason)),
                Ok(Routed::Answered(prefix, response, code)) => {
                    if prefix.api_key != API_VERSIONS {
                        if let Some(reason) = conn.refusal(prefix.api_key, self.now) {
                            return self.end(id, End::Refused(Refusal::Unauthenticated, reason));
                        }
                    }
                    let stats = &self.shared.stats;
                    stats.received(prefix.api_key, prefix.api_version);
                    stats.answered(
                        prefix.api_key,
                        prefix.api_version,
                        self.now.elapsed(),
                        Some(code),
                    );
                    conn.budget.frame_taken(None);
                    conn.queue(response);
                }
                Ok(Routed::ToPython(prefix, frame)) => {
                    let size = frame.len();
                    let (key, version) = (prefix.api_key, prefix.api_version);
                    if let Some(reason) = conn.refusal(key, self.now) {
                        return self.end(id, End::Refused(Refusal::Unauthenticated, reason));
                    }
                    let stats = &self.shared.stats;
                    stats.received(key, version);
                    let received = requests::receive(prefix, frame);
                    // Off while a fault is injected: every request reaches Python.
                    let short_path_allowed = self.shared.short_paths.load(Ordering::Relaxed)
                        && (!self.authorize_short_paths
                            || received
                                .group_id()
                                .is_some_and(|group| conn.authorized_groups.contains(group)));
                    let answer = if short_path_allowed {
                        received.answer(&self.views, &conn.client_host)
                    } else {
                        None
                    };
                    // With an authorizer, a commit's topics must be authorized on the connection too.
                    let topics_allowed = || {
                        !self.authorize_short_paths
                            || received
                                .commit_topics()
                                .all(|topic| conn.authorized_topics.contains(topic))
                    };
                    let took = if short_path_allowed && answer.is_none() && topics_allowed() {
                        received.take(&self.views, &conn.client_host, id)
                    } else {
                        None
                    };
                    if let Some((response, code)) = answer.or(match took {
                        Some(Took::Answered(ref response)) => Some((response.clone(), 0)),
                        _ => None,
                    }) {
                        stats.answered(key, version, self.now.elapsed(), Some(code));
                        conn.budget.frame_taken(None);
                        conn.queue(response);
                    } else if let Some(Took::Waiting) = took {
                        // Answered by the fsync pass that covers it (`Outbound::CoreAnswer`).
                        conn.budget.frame_taken(Some(size));
                        conn.busy = true;
                        conn.with_python = (key, version, self.now);
                    } else {
                        conn.budget.frame_taken(Some(size));
                        conn.busy = true;
                        conn.with_python = (key, version, self.now);
                        let (peer, client_host) = (conn.peer.clone(), conn.client_host.clone());
                        let (listener, principal) = (
                            self.listeners[conn.listener].name.clone(),
                            conn.principal.clone(),
                        );
                        self.for_python.push(Inbound::Request {
                            connection: id,
                            received,
                            peer,
                            client_host,
                            listener,
                            principal,
                        });
                    }
                }
            }
            self.pool_freed |= conn.recharge(&mut self.pool);
        }
        self.flush(id);
    }

    /// Writes queued responses until the socket is full (a writable event resumes it).
    pub(super) fn flush(&mut self, id: u64) {
        let Some(conn) = self.connections.get_mut(&id) else {
            return;
        };
        let was_full = conn.out_bytes >= OUT_LIMIT;
        if let Some(tls) = conn.tls.as_mut() {
            // Everything goes through the TLS session: what it cannot take yet stays in `out`.
            match tls.flush(&mut conn.stream, &mut conn.out) {
                Ok(taken) => {
                    if taken > 0 {
                        conn.last_active = self.now;
                    }
                    conn.out_bytes -= taken;
                }
                Err(_) => return self.end(id, End::Closed),
            }
        }
        while conn.tls.is_none() && !conn.out.is_empty() {
            let written = if conn.out.len() == 1 {
                conn.stream.write(&conn.out[0])
            } else {
                let slices: Vec<IoSlice<'_>> =
                    conn.out.iter().take(64).map(|b| IoSlice::new(b)).collect();
                conn.stream.write_vectored(&slices)
            };
            match written {
                Ok(0) => return self.end(id, End::Closed),
                Ok(mut n) => {
                    conn.last_active = self.now;
                    conn.out_bytes -= n;
                    while n > 0 {
                        let front = conn.out.front_mut().expect("written bytes were queued");
                        if n >= front.len() {
                            n -= front.len();
                            conn.out.pop_front();
                        } else {
                            front.advance(n);
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.end(id, End::Closed),
            }
        }
        if conn.closing
            && conn.out.is_empty()
            && !conn.busy
            && !conn.tls.as_ref().is_some_and(|tls| tls.pending())
        {
            // Kafka delays the close: the client reads its answer first, and guessing is slower.
            if self.delayed_closes.immediate() {
                return self.end(id, End::Closed);
            }
            if !conn.close_scheduled {
                conn.close_scheduled = true;
                self.delayed_closes.schedule(self.now, id);
            }
            return;
        }
        // Frames held back by a full output can go on now.
        if was_full && conn.out_bytes < OUT_LIMIT {
            self.serve(id);
        }
    }

    /// The answer to a connection's request that was with Python (`core_code` None) or waited
    /// for the commit path's fsync (its error code): the connection may go on.
    pub(super) fn answered(&mut self, id: u64, response: Option<Bytes>, core_code: Option<i16>) {
        let Some(conn) = self.connections.get_mut(&id) else {
            return;
        };
        conn.busy = false;
        let (key, version, since) = conn.with_python;
        self.shared.stats.answered(
            key,
            version,
            self.now.saturating_duration_since(since),
            core_code,
        );
        conn.budget.answered();
        self.pool_freed |= conn.recharge(&mut self.pool);
        if let Some(frame) = conn.outgoing(response) {
            conn.queue(frame);
        }
        self.serve(id);
    }
}
