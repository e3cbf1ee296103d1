//! One client connection's bytes -> requests, and the answers the core gives by itself.
//!
//! A frame goes three steps. `route` checks its header against the advertised table and answers
//! what the core owns; `receive` reads the rest of the header and, for a short path (Heartbeat,
//! OffsetCommit, ConsumerGroupHeartbeat: the table in short_paths/mod.rs), decodes the body into
//! its Rust struct, where a short path may be answered without Python; both run without the GIL.
//! `build_request` makes the `Request` Python handlers receive, decoding any other body into a
//! dict. The broker's network thread (network/reactor/) uses all three; `Connection`
//! (connection.rs) wraps them for code that feeds bytes in process. Who owns what:
//!
//! - Rust: ApiVersions (a pure function of the advertised table, cached per version), the refusal
//!   of Produce v0-2 (advertised for old librdkafka, answered UNSUPPORTED_VERSION), and the
//!   short-path answers of the network thread (steady-state Heartbeats and ConsumerGroupHeartbeats,
//!   from the `HeartbeatView` and the `ConsumerHeartbeatView`).
//! - Python: everything that reads or changes broker state (metadata, topics, configs, groups...).
//!
//! Bad input raises `ProtocolError` (the reactor: closes the connection with the reason logged).

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::{ApiVersionsRequest, ProduceRequest};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::codec::apis;
use crate::codec::header::{self, RequestPrefix};
use crate::short_paths::commit_path::Took;
use crate::short_paths::{self, Decoded, Holds, Sender, Views};
use kafka_protocol::ResponseError;

create_exception!(
    _core,
    ProtocolError,
    PyException,
    "Malformed or unsupported input: close the connection."
);

const PRODUCE: i16 = 0;
const API_VERSIONS: i16 = 18;
const UNSUPPORTED_VERSION: i16 = ResponseError::UnsupportedVersion.code();

/// The APIs this broker advertises, with ApiVersions answers pre-encoded for every version.
#[pyclass(frozen, module = "corral._core")]
pub struct ApiTable {
    ranges: Vec<(i16, i16, i16)>,
    /// ApiVersions response bodies, indexed by request version.
    api_versions_bodies: Vec<Bytes>,
    /// The v0 body sent when a client asks ApiVersions in a version above ours.
    unsupported_body: Bytes,
}

impl ApiTable {
    fn range(&self, api_key: i16) -> Option<(i16, i16)> {
        self.ranges
            .iter()
            .find(|r| r.0 == api_key)
            .map(|r| (r.1, r.2))
    }
}

#[pymethods]
impl ApiTable {
    /// `ranges`: (api_key, min_version, max_version) for every API this broker implements.
    #[new]
    fn new(ranges: Vec<(i16, i16, i16)>) -> PyResult<Self> {
        for &(key, min, max) in &ranges {
            let (cmin, cmax) = apis::codec_versions(key)
                .ok_or_else(|| PyValueError::new_err(format!("the codec has no api key {key}")))?;
            // Advertising below the codec's minimum is allowed (Produce v0-2 is advertised and
            // then refused); above its maximum is not.
            if max > cmax || min > max || max < cmin {
                return Err(PyValueError::new_err(format!(
                    "api key {key}: {min}..={max} is outside the codec's {cmin}..={cmax}"
                )));
            }
        }
        let (av_min, av_max) = ranges
            .iter()
            .find(|r| r.0 == API_VERSIONS)
            .map(|r| (r.1, r.2))
            .ok_or_else(|| PyValueError::new_err("ApiVersions must be advertised"))?;
        let api_keys: Vec<ApiVersion> = ranges
            .iter()
            .map(|&(k, min, max)| {
                ApiVersion::default()
                    .with_api_key(k)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect();
        let encode = |resp: &ApiVersionsResponse, version: i16| -> PyResult<Bytes> {
            let mut out = BytesMut::new();
            resp.encode(&mut out, version)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            Ok(out.freeze())
        };
        let full = ApiVersionsResponse::default().with_api_keys(api_keys);
        let api_versions_bodies = (0..=av_max)
            .map(|v| {
                if v < av_min {
                    Ok(Bytes::new())
                } else {
                    encode(&full, v)
                }
            })
            .collect::<PyResult<Vec<_>>>()?;
        let unsupported = ApiVersionsResponse::default()
            .with_error_code(UNSUPPORTED_VERSION)
            .with_api_keys(vec![ApiVersion::default()
                .with_api_key(API_VERSIONS)
                .with_min_version(av_min)
                .with_max_version(av_max)]);
        Ok(ApiTable {
            ranges,
            api_versions_bodies,
            unsupported_body: encode(&unsupported, 0)?,
        })
    }

    /// The advertised (api_key, min, max) triples.
    fn advertised(&self) -> Vec<(i16, i16, i16)> {
        self.ranges.clone()
    }
}

/// A decoded request for a Python-owned API.
#[pyclass(frozen, module = "corral._core")]
pub struct Request {
    #[pyo3(get)]
    api_key: i16,
    #[pyo3(get)]
    api_version: i16,
    #[pyo3(get)]
    correlation_id: i32,
    client_id: Option<StrBytes>,
    /// The network thread's id of the connection the request came on (0 outside a `Reactor`).
    #[pyo3(get)]
    connection: u64,
    /// The client's address as Kafka reports it ("/127.0.0.1"); "" when unknown.
    #[pyo3(get)]
    client_host: String,
    /// The listener's name as in `listeners` ("PLAINTEXT", "SASL_SSL", ...).
    listener: Arc<str>,
    /// Who the connection is, as Kafka writes principals: "User:ANONYMOUS" until authenticated,
    /// "User:<name>" after SASL, "User:<subject DN>" for a TLS client certificate.
    principal: Arc<str>,
    body: Body,
}

enum Body {
    /// The schema's fields as a dict.
    Dict(Py<PyAny>),
    /// A short path's named type (short_paths/mod.rs).
    Typed(Py<PyAny>),
}

#[pymethods]
impl Request {
    #[getter]
    fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }

    #[getter]
    fn listener(&self) -> &str {
        &self.listener
    }

    #[getter]
    fn principal(&self) -> &str {
        &self.principal
    }

    /// The request body as a dict of the schema's fields (a short path's is made from its
    /// struct when asked for).
    #[getter]
    fn body(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.body {
            Body::Dict(body) => Ok(body.clone_ref(py)),
            Body::Typed(typed) => Ok(short_paths::body_dict(typed.bind(py))?.unbind()),
        }
    }

    /// A short path's request as its named type (`HeartbeatRequest`, `OffsetCommitRequest`);
    /// None for the APIs decoded into a dict.
    #[getter]
    fn typed(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        match &self.body {
            Body::Dict(_) => None,
            Body::Typed(typed) => Some(typed.clone_ref(py)),
        }
    }

    /// Encodes `body` (a dict of the response schema's fields) as this request's response frame.
    fn respond<'py>(
        &self,
        py: Python<'py>,
        body: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        encode_response_frame(
            py,
            self.api_key,
            self.api_version,
            self.correlation_id,
            body,
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "Request(api_key={}, api_version={}, correlation_id={}, client_id={:?})",
            self.api_key, self.api_version, self.correlation_id, self.client_id
        )
    }
}

pub fn encode_response_frame<'py>(
    py: Python<'py>,
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = BytesMut::with_capacity(128);
    header::begin_response(
        &mut out,
        correlation_id,
        apis::response_header_version(api_key, api_version),
    );
    apis::encode_response(api_key, api_version, body, &mut out)?;
    header::finish_frame(&mut out);
    Ok(PyBytes::new(py, &out))
}

pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Where a frame goes: answered by the core at once (with the response's error code, for the
/// metrics), or handed to Python.
pub enum Routed {
    Answered(RequestPrefix, Bytes, i16),
    ToPython(RequestPrefix, Bytes),
}

/// Checks a frame's header against the table and answers what the core owns (ApiVersions, the
/// Produce v0-2 refusal). Err: close the connection, with this reason.
pub fn route(table: &ApiTable, frame: Bytes) -> Result<Routed, String> {
    let prefix = header::parse_prefix(&frame).map_err(|e| e.to_string().trim_end().to_owned())?;
    let RequestPrefix {
        api_key,
        api_version,
        correlation_id,
    } = prefix.clone();
    let Some((min, max)) = table.range(api_key) else {
        return Err(format!("unknown api key {api_key} (version {api_version})"));
    };
    if api_key == API_VERSIONS {
        let code = if api_version < min || api_version > max {
            UNSUPPORTED_VERSION
        } else {
            0
        };
        return api_versions_answer(table, api_version, correlation_id, frame)
            .map(|answer| Routed::Answered(prefix, answer, code));
    }
    if api_version < min || api_version > max {
        return Err(format!(
            "api key {api_key} version {api_version} is not in {min}..={max}"
        ));
    }
    if api_key == PRODUCE && api_version < 3 {
        return legacy_produce_refusal(api_version, correlation_id, frame)
            .map(|answer| Routed::Answered(prefix, answer, UNSUPPORTED_VERSION));
    }
    Ok(Routed::ToPython(prefix, frame))
}

/// A routed request as far as it goes without the GIL: header read and, for a short path, body
/// decoded.
pub struct Received {
    prefix: RequestPrefix,
    client_id: Option<StrBytes>,
    payload: Payload,
}

// Decoded, the big variant (a ConsumerGroupHeartbeat is 272 bytes of fields), is what the short
// paths carry: boxing it would allocate once per heartbeat.
#[allow(clippy::large_enum_variant)]
enum Payload {
    /// The body after the header, decoded into a dict by `build_request`.
    Raw(Bytes),
    /// A short path's body.
    Decoded(Decoded),
    /// The header or a short path's body does not decode: `build_request` raises ProtocolError
    /// with this reason (for the reactor: Python logs it and closes the connection).
    Malformed(String),
}

/// Reads a routed frame's header and decodes a short path's body (short_paths/mod.rs).
pub fn receive(prefix: RequestPrefix, frame: Bytes) -> Received {
    let mut body = frame;
    let header_version = apis::request_header_version(prefix.api_key, prefix.api_version);
    let (client_id, payload) = match header::skip_header(&mut body, header_version) {
        Err(e) => (
            None,
            Payload::Malformed(e.to_string().trim_end().to_owned()),
        ),
        Ok(client_id) => match Decoded::decode(&prefix, &mut body) {
            None => (client_id, Payload::Raw(body)),
            Some(Ok(decoded)) => (client_id, Payload::Decoded(decoded)),
            Some(Err(e)) => (
                client_id,
                Payload::Malformed(body_error_text(prefix.api_key, prefix.api_version, e)),
            ),
        },
    };
    Received {
        prefix,
        client_id,
        payload,
    }
}

impl Received {
    /// A short path's group, when its body decoded.
    pub fn group_id(&self) -> Option<&str> {
        match &self.payload {
            Payload::Decoded(decoded) => Some(decoded.group_id()),
            Payload::Raw(_) | Payload::Malformed(_) => None,
        }
    }

    /// The response frame and its error code when a short path is answered without Python;
    /// `client_host` is the connection's, as `Request.client_host` would carry it.
    pub fn answer(&self, views: &Views, client_host: &str) -> Option<(Bytes, i16)> {
        match &self.payload {
            Payload::Decoded(decoded) => decoded.answer(
                views,
                &Sender {
                    client_id: self.client_id.as_deref(),
                    client_host,
                },
            ),
            Payload::Raw(_) | Payload::Malformed(_) => None,
        }
    }
}

impl Received {
    /// The topics an OffsetCommit names (none for anything else).
    pub fn commit_topics(&self) -> impl Iterator<Item = &str> {
        let commit = match &self.payload {
            Payload::Decoded(Decoded::OffsetCommit(commit)) => Some(commit.body()),
            _ => None,
        };
        commit
            .into_iter()
            .flat_map(|c| c.topics.iter().map(|t| t.name.as_str()))
    }

    /// An OffsetCommit or a member's move written and answered by the commit path
    /// (commit_path.rs), if it takes it; `client_host` as for `answer`.
    pub fn take(&self, views: &Views, client_host: &str, connection: u64) -> Option<Took> {
        match &self.payload {
            Payload::Decoded(decoded) => decoded.take(
                views,
                &Sender {
                    client_id: self.client_id.as_deref(),
                    client_host,
                },
                connection,
            ),
            Payload::Raw(_) | Payload::Malformed(_) => None,
        }
    }
}

/// Where a request came from, as its `Request` tells Python.
pub struct Identity {
    pub connection: u64,
    pub client_host: String,
    pub listener: Arc<str>,
    pub principal: Arc<str>,
}

/// The `Request` Python handlers receive: any body but a short path's decoded into a dict.
pub fn build_request(py: Python<'_>, received: Received, who: Identity) -> PyResult<Request> {
    let Identity {
        connection,
        client_host,
        listener,
        principal,
    } = who;
    let Received {
        prefix:
            RequestPrefix {
                api_key,
                api_version,
                correlation_id,
            },
        client_id,
        payload,
    } = received;
    let body = match payload {
        Payload::Raw(mut raw) => Body::Dict(
            apis::decode_request(py, api_key, api_version, &mut raw)
                .map_err(|e| body_error(api_key, api_version, e))?
                .unbind(),
        ),
        Payload::Decoded(decoded) => Body::Typed(decoded.into_py(py)?),
        Payload::Malformed(reason) => return Err(ProtocolError::new_err(reason)),
    };
    Ok(Request {
        api_key,
        api_version,
        correlation_id,
        client_id,
        connection,
        client_host,
        listener,
        principal,
        body,
    })
}

/// Produce v0-2 is advertised (older librdkafka only compresses when the minimum is 0,
/// KAFKA-18659) but not served: every partition gets UNSUPPORTED_VERSION. The v0-2 request is the
/// v3 body without its leading transactional id, so it is decoded as v3 behind a null one; the
/// v0-2 response is written by hand because the codec starts at v3. With acks=0 nothing may be
/// answered, so the connection is closed, which is how Kafka reports errors to acks=0 producers.
fn legacy_produce_refusal(
    api_version: i16,
    correlation_id: i32,
    frame: Bytes,
) -> Result<Bytes, String> {
    let mut body = frame;
    header::skip_header(&mut body, 1).map_err(|e| e.to_string().trim_end().to_owned())?;
    let mut v3 = BytesMut::with_capacity(body.len() + 2);
    v3.put_i16(-1);
    v3.extend_from_slice(&body);
    let request = ProduceRequest::decode(&mut v3.freeze(), 3)
        .map_err(|e| body_error_text(PRODUCE, api_version, e))?;
    if request.acks == 0 {
        return Err(format!(
            "Produce v{api_version} is not supported (acks=0: closing)"
        ));
    }
    let mut out = BytesMut::with_capacity(64);
    header::begin_response(&mut out, correlation_id, 0);
    out.put_i32(request.topic_data.len() as i32);
    for topic in &request.topic_data {
        let name = topic.name.0.as_bytes();
        out.put_i16(name.len() as i16);
        out.put_slice(name);
        out.put_i32(topic.partition_data.len() as i32);
        for partition in &topic.partition_data {
            out.put_i32(partition.index);
            out.put_i16(UNSUPPORTED_VERSION);
            out.put_i64(-1); // base_offset
            if api_version >= 2 {
                out.put_i64(-1); // log_append_time_ms
            }
        }
    }
    if api_version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    header::finish_frame(&mut out);
    Ok(out.freeze())
}

/// ApiVersions is answered from the table; a version above ours gets UNSUPPORTED_VERSION with our
/// range in a v0 body (the Java client retries with it and disconnects on anything else).
fn api_versions_answer(
    table: &ApiTable,
    api_version: i16,
    correlation_id: i32,
    frame: Bytes,
) -> Result<Bytes, String> {
    let (min, max) = table
        .range(API_VERSIONS)
        .expect("ApiVersions is always advertised");
    let body = if api_version > max || api_version < min {
        &table.unsupported_body
    } else {
        // Decode the body anyway so that a garbled request is refused like any other.
        let mut body = frame;
        header::skip_header(
            &mut body,
            apis::request_header_version(API_VERSIONS, api_version),
        )
        .map_err(|e| e.to_string().trim_end().to_owned())?;
        // Validated as the Rust struct only: no Python objects for a request the core answers.
        ApiVersionsRequest::decode(&mut body, api_version)
            .map_err(|e| body_error_text(API_VERSIONS, api_version, e))?;
        &table.api_versions_bodies[api_version as usize]
    };
    let mut out = BytesMut::with_capacity(body.len() + 8);
    header::begin_response(&mut out, correlation_id, 0); // always header v0 for ApiVersions
    out.extend_from_slice(body);
    header::finish_frame(&mut out);
    Ok(out.freeze())
}

/// A body that does not decode; the message becomes one log line, so it names the API and stays
/// on one line (some kafka-protocol errors end in a newline).
fn body_error(api_key: i16, api_version: i16, e: anyhow::Error) -> PyErr {
    ProtocolError::new_err(body_error_text(api_key, api_version, e))
}

fn body_error_text(api_key: i16, api_version: i16, e: anyhow::Error) -> String {
    format!(
        "api key {api_key} v{api_version}: {}",
        e.to_string().trim_end()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_api_versions(body: &Bytes, version: i16) -> ApiVersionsResponse {
        ApiVersionsResponse::decode(&mut body.clone(), version).expect("a valid ApiVersions body")
    }

    #[test]
    fn api_versions_bodies_are_precomputed_for_every_version() {
        let table = ApiTable::new(vec![(3, 0, 12), (18, 0, 4), (19, 2, 7)]).unwrap();
        for version in 0..=4 {
            let response =
                decode_api_versions(&table.api_versions_bodies[version as usize], version);
            assert_eq!(response.error_code, 0);
            let ranges: Vec<_> = response
                .api_keys
                .iter()
                .map(|k| (k.api_key, k.min_version, k.max_version))
                .collect();
            assert_eq!(ranges, vec![(3, 0, 12), (18, 0, 4), (19, 2, 7)]);
        }
    }

    #[test]
    fn too_new_api_versions_gets_unsupported_version_with_our_range_in_a_v0_body() {
        let table = ApiTable::new(vec![(18, 0, 4), (60, 0, 2)]).unwrap();
        let response = decode_api_versions(&table.unsupported_body, 0);
        assert_eq!(response.error_code, UNSUPPORTED_VERSION);
        let ranges: Vec<_> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(ranges, vec![(18, 0, 4)]);
        // error code, array length, one (key, min, max) entry.
        assert_eq!(table.unsupported_body.len(), 2 + 4 + 6);
    }

    #[test]
    fn table_refuses_what_the_codec_cannot_speak() {
        assert!(
            ApiTable::new(vec![(18, 0, 4), (3, 0, 99)]).is_err(),
            "above the codec's maximum"
        );
        assert!(
            ApiTable::new(vec![(18, 0, 4), (9999, 0, 0)]).is_err(),
            "unknown key"
        );
        assert!(
            ApiTable::new(vec![(3, 0, 12)]).is_err(),
            "ApiVersions missing"
        );
        assert!(ApiTable::new(vec![(18, 3, 2)]).is_err(), "min above max");
        assert_eq!(
            ApiTable::new(vec![(18, 0, 4), (3, 0, 12)])
                .unwrap()
                .range(3),
            Some((0, 12))
        );
    }
}
