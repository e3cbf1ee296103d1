//! The short paths, from one table: the requests the core decodes into their Rust struct, once,
//! without the GIL.
//!
//! Every other request reaches Python as a dict of its schema's fields, decoded under the GIL
//! (`Request.body`). The steady-state requests of group members are too frequent for that: each
//! has one entry in the `short_paths!` table below, naming a frozen #[pyclass] that implements
//! `ShortPath` (it holds the decoded struct). For these, `requests::receive` (codec/requests.rs)
//! decodes the body where the frame is read (the network thread; `Connection` in process) and then:
//!
//! - `ShortPath::answer` may answer it there and then, without Python (Heartbeat, from the
//!   `HeartbeatView` or, for a classic member of a consumer group, the `ConsumerHeartbeatView`;
//!   ConsumerGroupHeartbeat, from the `ConsumerHeartbeatView`); an OffsetCommit the views accept
//!   may be taken by the commit path (`Decoded::take`, commit_path.rs), which appends it and
//!   answers it after its fsync (docs/offset-commit-short-path.md), and so may the heartbeat of
//!   a member the network thread moves to its group's target epoch (consumer_epoch_moves.rs);
//! - otherwise the decoded value goes to Python as it is, as that named type (`Request.typed`: a
//!   `HeartbeatRequest`, an `OffsetCommitRequest`, a `ConsumerGroupHeartbeatRequest`), with the
//!   fields as getters and its own ways to answer. Nothing is decoded again: `Request.body`, if asked for, makes the dict from the struct.
//!
//! A body that does not decode closes the connection as any other request's does (the reason
//! goes to Python, which logs it and closes, after the answers before it).
//!
//! A new short path is a `short_path_request!` type, its `ShortPath` impl and one line in the
//! table; `Views` gains what its `answer` reads, if anything.

pub(crate) mod commit_path;
pub(crate) mod consumer_heartbeat;
pub(crate) mod heartbeat;
pub(crate) mod offset_commit;

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::protocol::{Decodable, Request as KafkaRequest};
use pyo3::prelude::*;

use crate::codec::header::RequestPrefix;
use crate::groups::consumer_heartbeat_view::ConsumerHeartbeatView;
use crate::groups::heartbeat_view::HeartbeatView;
use crate::pyconv::ToPy;
use commit_path::{CommitPath, Took};
use consumer_heartbeat::ConsumerHeartbeat;
use heartbeat::Heartbeat;
use offset_commit::OffsetCommit;

/// What a short path's request type holds: the decoded body and what answering it needs
/// (version, correlation id). `short_path_request!` declares the type and implements this.
pub trait Holds: Sized {
    /// The kafka-protocol request struct; its `KEY` is the API key the entry serves.
    type Body: KafkaRequest + ToPy;

    fn new(body: Self::Body, prefix: &RequestPrefix) -> Self;

    fn body(&self) -> &Self::Body;
}

/// A short path's request type: a frozen #[pyclass] (declared by `short_path_request!`).
pub trait ShortPath: Holds {
    /// The whole response frame and its error code when the network thread can answer by
    /// itself; None: Python answers. Runs without the GIL.
    fn answer(&self, _views: &Views, _sender: &Sender<'_>) -> Option<(Bytes, i16)> {
        None
    }
}

/// Declares a short path's request type: the frozen #[pyclass] `$name` (`$py_name` in Python)
/// holding the decoded `$body`, its version and correlation id, with its `Holds` impl.
macro_rules! short_path_request {
    ($(#[$doc:meta])* $name:ident, $py_name:literal, $body:ty) => {
        $(#[$doc])*
        #[pyo3::pyclass(frozen, name = $py_name, module = "corral._core")]
        pub struct $name {
            body: $body,
            api_version: i16,
            correlation_id: i32,
        }

        impl crate::short_paths::Holds for $name {
            type Body = $body;

            fn new(body: $body, prefix: &crate::codec::header::RequestPrefix) -> Self {
                $name { body, api_version: prefix.api_version, correlation_id: prefix.correlation_id }
            }

            fn body(&self) -> &$body {
                &self.body
            }
        }
    };
}
pub(crate) use short_path_request;

/// What the network thread answers short paths from: state Python keeps up to date for it.
#[derive(Default)]
pub struct Views {
    pub heartbeat: Option<Py<HeartbeatView>>,
    pub consumer_heartbeat: Option<Py<ConsumerHeartbeatView>>,
    /// Where the network thread writes the OffsetCommits it takes (None: Python writes all).
    pub commit_path: Option<Py<CommitPath>>,
}

/// Who sent a request, as Python's `Request` reports it (`client_id`, `client_host`): an answer
/// may depend on it (a consumer group member's client id and host are part of its metadata).
#[derive(Clone, Copy, Default)]
pub struct Sender<'a> {
    pub client_id: Option<&'a str>,
    pub client_host: &'a str,
}

macro_rules! short_paths {
    ($($variant:ident($named:ty);)*) => {
        /// A short path's request, decoded: plain Rust until `into_py`, so it is made and
        /// answered without the GIL.
        pub enum Decoded {
            $($variant($named),)*
        }

        impl Decoded {
            /// The body (the frame after its header) decoded, if `prefix.api_key` has a short
            /// path; None for the APIs Python gets as a dict.
            pub fn decode(prefix: &RequestPrefix, body: &mut Bytes) -> Option<Result<Decoded>> {
                $(
                    if prefix.api_key == <<$named as Holds>::Body as KafkaRequest>::KEY {
                        return Some(decode::<$named>(prefix, body).map(Decoded::$variant));
                    }
                )*
                None
            }

            /// The group the request is for (every short path names one).
            pub fn group_id(&self) -> &str {
                match self {
                    $(Decoded::$variant(request) => request.body().group_id.0.as_str(),)*
                }
            }

            pub fn answer(&self, views: &Views, sender: &Sender<'_>) -> Option<(Bytes, i16)> {
                match self {
                    $(Decoded::$variant(request) => request.answer(views, sender),)*
                }
            }

            /// An OffsetCommit the commit path takes (commit_path.rs), or a ConsumerGroupHeartbeat
            /// whose member the network thread moves to its target epoch through it
            /// (consumer_epoch_moves.rs); None for anything else.
            pub fn take(&self, views: &Views, sender: &Sender<'_>, connection: u64) -> Option<Took> {
                match self {
                    Decoded::OffsetCommit(commit) => commit.take(views, connection),
                    Decoded::ConsumerHeartbeat(heartbeat) => heartbeat.take(views, sender, connection),
                    _ => None,
                }
            }

            /// The named type Python handlers get.
            pub fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                match self {
                    $(Decoded::$variant(request) => Ok(Py::new(py, request)?.into_any()),)*
                }
            }
        }

        /// The dict of the schema's fields of a short path's named request, made from its struct.
        pub fn body_dict<'py>(typed: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
            $(
                if let Ok(request) = typed.cast::<$named>() {
                    return request.get().body().to_py(typed.py());
                }
            )*
            Err(pyo3::exceptions::PyTypeError::new_err("not a short path's request"))
        }

        /// Adds the named types to the module.
        fn register_requests(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add_class::<$named>()?;)*
            Ok(())
        }

        #[cfg(test)]
        const KEYS: &[i16] = &[$(<<$named as Holds>::Body as KafkaRequest>::KEY,)*];
    };
}

// The table, one line per short path: `Decoded`'s variant (the #[pyclass] it holds). The API key
// is that type's `ShortPath::Body::KEY`.
short_paths! {
    OffsetCommit(OffsetCommit);
    Heartbeat(Heartbeat);
    ConsumerHeartbeat(ConsumerHeartbeat);
}

/// Adds the short paths' named request types, the commit path and its answer to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    register_requests(m)?;
    m.add_class::<offset_commit::OffsetCommitAnswer>()?;
    m.add_class::<commit_path::CommitPath>()?;
    Ok(())
}

fn decode<T: ShortPath>(prefix: &RequestPrefix, body: &mut Bytes) -> Result<T> {
    let decoded = T::Body::decode(body, prefix.api_version)?;
    Ok(T::new(decoded, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::{
        ConsumerGroupHeartbeatRequest, GroupId, HeartbeatRequest, OffsetCommitRequest,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn prefix(api_key: i16, api_version: i16) -> RequestPrefix {
        RequestPrefix {
            api_key,
            api_version,
            correlation_id: 7,
        }
    }

    fn group(id: &'static str) -> GroupId {
        GroupId(StrBytes::from_static_str(id))
    }

    fn encoded<T: Encodable>(message: &T, version: i16) -> Bytes {
        let mut out = BytesMut::new();
        message.encode(&mut out, version).unwrap();
        out.freeze()
    }

    #[test]
    fn one_entry_per_api_key() {
        let mut keys = KEYS.to_vec();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), KEYS.len());
        assert_eq!(KEYS, &[8, 12, 68]);
    }

    #[test]
    fn short_paths_decode_to_their_named_type_and_others_are_left_alone() {
        let heartbeat = HeartbeatRequest::default()
            .with_group_id(group("g"))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_generation_id(3);
        let mut body = encoded(&heartbeat, 4);
        match Decoded::decode(&prefix(12, 4), &mut body) {
            Some(Ok(Decoded::Heartbeat(decoded))) => assert_eq!(decoded.body(), &heartbeat),
            _ => panic!("a Heartbeat decodes to Decoded::Heartbeat"),
        }
        let commit = OffsetCommitRequest::default().with_group_id(group("g"));
        let mut body = encoded(&commit, 9);
        assert!(matches!(
            Decoded::decode(&prefix(8, 9), &mut body),
            Some(Ok(Decoded::OffsetCommit(_)))
        ));
        let mut body = encoded(
            &ConsumerGroupHeartbeatRequest::default().with_group_id(group("g")),
            1,
        );
        assert!(matches!(
            Decoded::decode(&prefix(68, 1), &mut body),
            Some(Ok(Decoded::ConsumerHeartbeat(_)))
        ));
        assert!(
            Decoded::decode(&prefix(3, 12), &mut Bytes::from_static(&[0, 0])).is_none(),
            "Metadata: a dict"
        );
    }

    #[test]
    fn a_short_path_without_views_is_left_to_python() {
        let mut body = encoded(&HeartbeatRequest::default().with_group_id(group("g")), 0);
        let decoded = Decoded::decode(&prefix(12, 0), &mut body).unwrap().unwrap();
        assert!(decoded
            .answer(&Views::default(), &Sender::default())
            .is_none());
    }

    #[test]
    fn a_truncated_body_is_an_error() {
        let mut body = encoded(&HeartbeatRequest::default().with_group_id(group("g")), 4);
        let mut cut = body.split_to(body.len() - 2);
        assert!(matches!(
            Decoded::decode(&prefix(12, 4), &mut cut),
            Some(Err(_))
        ));
    }
}
