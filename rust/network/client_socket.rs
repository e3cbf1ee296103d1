//! One client connection of the network thread (reactor/): its socket and TLS session, its
//! frames in and answers out, and its security state (principal, SASL progress and session end,
//! the groups whose heartbeats the short paths may answer for it).

use std::collections::{HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mio::net::{TcpListener, TcpStream};

use crate::codec::frames::{FrameError, FrameSplitter};
use crate::network::limits::{Budget, Pool};
use crate::network::sasl_raw;
use crate::network::tls::{Tls, TlsServerConfig};

/// Reading stops while a whole frame and this many bytes wait.
pub(crate) const READ_AHEAD: usize = 256 * 1024;
/// Processing stops while this many bytes of answers wait for the client to read them.
pub(crate) const OUT_LIMIT: usize = 4 * 1024 * 1024;
/// Groups one connection may heartbeat on the short paths without asking Python again; past it
/// the set starts over (a client of more groups than this gets some heartbeats checked twice).
const MAX_AUTHORIZED_GROUPS: usize = 1024;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;

pub(crate) struct Listener {
    pub(crate) socket: TcpListener,
    pub(crate) name: Arc<str>,
    pub(crate) sasl: bool,
    /// An SSL or SASL_SSL listener's rustls configuration and principal mapping rules.
    pub(crate) tls: Option<TlsServerConfig>,
}

/// Where a connection is in Kafka's pre-KIP-152 SASL flow (`raw_sasl_tokens`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawSasl {
    Off,
    /// The SaslHandshake v0 being answered: bare tokens follow its answer.
    AfterAnswer,
    On,
}

pub(crate) struct ClientSocket {
    pub(crate) stream: TcpStream,
    /// The TLS session on an SSL or SASL_SSL listener.
    pub(crate) tls: Option<Box<Tls>>,
    /// Index of its listener in `Network::listeners`.
    pub(crate) listener: usize,
    /// Who the requests come from (Kafka's principal string).
    pub(crate) principal: Arc<str>,
    /// On a SASL listener: until authenticated, only ApiVersions and SASL requests are served.
    pub(crate) authenticated: bool,
    /// When the SASL session ends (connections.max.reauth.ms): after it only re-authentication.
    pub(crate) session_ends: Option<Instant>,
    /// Kafka's pre-KIP-152 flow: after SaslHandshake v0 the frames are bare SASL tokens, and so
    /// are the answers, until authentication ends.
    pub(crate) raw_sasl: RawSasl,
    /// Groups whose heartbeats the short paths may answer (with an authorizer on).
    pub(crate) authorized_groups: HashSet<Box<str>>,
    /// Topics the connection's principal may READ: the commit path may take its OffsetCommits
    /// naming only these (and an authorized group) with an authorizer on.
    pub(crate) authorized_topics: HashSet<Box<str>>,
    /// Python keeps state for it: report its close.
    pub(crate) watched: bool,
    /// Close once the answers are written.
    pub(crate) closing: bool,
    /// In `Network::delayed_closes`.
    pub(crate) close_scheduled: bool,
    pub(crate) ip: IpAddr,
    pub(crate) peer: Arc<str>,
    pub(crate) client_host: Arc<str>,
    pub(crate) frames: FrameSplitter,
    pub(crate) out: VecDeque<Bytes>,
    pub(crate) out_bytes: usize,
    /// A request of this connection is with Python.
    pub(crate) busy: bool,
    /// That request's key, version and when it was taken (for its latency).
    pub(crate) with_python: (i16, i16, Instant),
    /// Reading stopped before the socket was drained (see READ_AHEAD and the pool).
    pub(crate) unread: bool,
    /// Its part of the queued-bytes pool.
    pub(crate) budget: Budget,
    /// Reading waits for room in the pool (the connection is in `Network::waiting`).
    pub(crate) pool_waiting: bool,
    /// When a byte was last read or written (the loop turn's clock).
    pub(crate) last_active: Instant,
    /// When the first bytes of the head frame arrived, while it is not whole.
    pub(crate) partial_since: Option<Instant>,
}

impl ClientSocket {
    pub(crate) fn may_read(&self) -> bool {
        !(self.frames.has_frame() && self.frames.buffered() >= READ_AHEAD)
    }

    pub(crate) fn may_process(&self) -> bool {
        !self.busy && !self.closing && self.out_bytes < OUT_LIMIT
    }

    /// Why a request with this key may not be served now (SASL not done, or its session over).
    pub(crate) fn refusal(&self, api_key: i16, now: Instant) -> Option<String> {
        let sasl_request = api_key == SASL_HANDSHAKE || api_key == SASL_AUTHENTICATE;
        if sasl_request {
            return None;
        }
        if !self.authenticated {
            return Some(format!(
                "unexpected request (api key {api_key}) before SASL authentication"
            ));
        }
        match self.session_ends {
            Some(end) if now >= end => Some(
                "the SASL session expired (connections.max.reauth.ms) without re-authentication"
                    .into(),
            ),
            _ => None,
        }
    }

    pub(crate) fn queue(&mut self, frame: Bytes) {
        self.out_bytes += frame.len();
        self.out.push_back(frame);
    }

    /// Tells the pool what this connection holds now; true when it holds less.
    pub(crate) fn recharge(&mut self, pool: &mut Pool) -> bool {
        pool.limited() && self.budget.recharge(pool, self.frames.buffered())
    }
    /// The next request frame: after a SaslHandshake v0 a bare token, made a SaslAuthenticate v0.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        let frame = self.frames.next_frame()?;
        Ok(match frame {
            Some(token) if self.raw_sasl == RawSasl::On => Some(sasl_raw::request_of_token(&token)),
            frame => frame,
        })
    }

    /// What goes out for Python's answer: the answer itself, or in the bare-token flow its
    /// token alone (nothing for a refusal: the connection closes unanswered).
    pub(crate) fn outgoing(&mut self, response: Option<Bytes>) -> Option<Bytes> {
        match (self.raw_sasl, response) {
            (RawSasl::AfterAnswer, response) => {
                self.raw_sasl = RawSasl::On;
                response
            }
            (RawSasl::On, Some(frame)) => {
                // The last token goes out bare too (it follows `authenticated`).
                if self.authenticated {
                    self.raw_sasl = RawSasl::Off;
                }
                sasl_raw::token_of_answer(&frame)
            }
            (_, response) => response,
        }
    }

    /// SASL succeeded: the connection is `principal` until `lifetime_ms` from `now` (0: for
    /// ever), and its requests may be as big as the broker's own bound.
    pub(crate) fn authenticated(
        &mut self,
        principal: String,
        lifetime_ms: u64,
        now: Instant,
        max_request_bytes: usize,
    ) {
        self.authenticated = true;
        self.principal = principal.into();
        self.frames
            .limit(max_request_bytes, "socket.request.max.bytes");
        // A lifetime past what Instant holds is no end.
        self.session_ends = (lifetime_ms > 0)
            .then(|| now.checked_add(Duration::from_millis(lifetime_ms)))
            .flatten();
    }

    /// The short paths may answer this connection's heartbeats for `group` (a bounded set).
    pub(crate) fn authorize_group(&mut self, group: String) {
        if self.authorized_groups.len() >= MAX_AUTHORIZED_GROUPS {
            self.authorized_groups.clear();
        }
        self.authorized_groups.insert(group.into());
    }

    /// The commit path may take this connection's commits to these topics (a bounded set).
    pub(crate) fn authorize_topics(&mut self, topics: Vec<String>) {
        if self.authorized_topics.len() + topics.len() > MAX_AUTHORIZED_GROUPS {
            self.authorized_topics.clear();
        }
        self.authorized_topics
            .extend(topics.into_iter().map(String::into_boxed_str));
    }
}
