//! Heartbeat's short path (short_paths/mod.rs): the steady-state request of every classic group
//! member.
//!
//! The network thread answers it from the `HeartbeatView` when the view knows the answer (a
//! member of the current generation of a Stable, CompletingRebalance or PreparingRebalance
//! group), or from the `ConsumerHeartbeatView` for a classic member of a consumer group STABLE
//! at its settled epoch (a group is in one view or the other, never both); every other Heartbeat
//! goes to the coordinator as a `HeartbeatRequest`, answered with
//! `HeartbeatRequest.respond(error_code)`. No dict is built either way.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::codec::header;
use crate::short_paths::{short_path_request, Sender, ShortPath, Views};

short_path_request! {
    /// A decoded Heartbeat (Python: `HeartbeatRequest`).
    Heartbeat, "HeartbeatRequest", HeartbeatRequest
}

impl ShortPath for Heartbeat {
    /// The views' answer; an empty group id (INVALID_GROUP_ID) is the coordinator's.
    fn answer(&self, views: &Views, _sender: &Sender<'_>) -> Option<(Bytes, i16)> {
        let hb = &self.body;
        if hb.group_id.is_empty() {
            return None;
        }
        let instance_id = hb.group_instance_id.as_deref();
        let classic = views.heartbeat.as_ref().and_then(|view| {
            view.get()
                .answer(&hb.group_id, &hb.member_id, instance_id, hb.generation_id)
        });
        let code = classic.or_else(|| {
            let view = views.consumer_heartbeat.as_ref()?.get();
            view.classic_answer(&hb.group_id, &hb.member_id, instance_id, hb.generation_id)
        })?;
        Some((response(self.api_version, self.correlation_id, code), code))
    }
}

#[pymethods]
impl Heartbeat {
    #[getter]
    fn group_id(&self) -> &str {
        &self.body.group_id
    }

    #[getter]
    fn member_id(&self) -> &str {
        &self.body.member_id
    }

    /// None before v3 and for dynamic members.
    #[getter]
    fn group_instance_id(&self) -> Option<&str> {
        self.body.group_instance_id.as_deref()
    }

    #[getter]
    fn generation_id(&self) -> i32 {
        self.body.generation_id
    }

    /// This Heartbeat's response frame with `error_code` (throttle time 0).
    fn respond<'py>(&self, py: Python<'py>, error_code: i16) -> Bound<'py, PyBytes> {
        PyBytes::new(
            py,
            &response(self.api_version, self.correlation_id, error_code),
        )
    }

    fn __repr__(&self) -> String {
        let hb = &self.body;
        format!(
            "HeartbeatRequest(group_id={:?}, member_id={:?}, group_instance_id={:?}, generation_id={})",
            hb.group_id.as_str(),
            hb.member_id.as_str(),
            hb.group_instance_id.as_deref(),
            hb.generation_id
        )
    }
}

/// A Heartbeat response frame with `error_code` (throttle time 0).
fn response(api_version: i16, correlation_id: i32, error_code: i16) -> Bytes {
    let mut out = BytesMut::with_capacity(32);
    header::begin_response(
        &mut out,
        correlation_id,
        HeartbeatResponse::header_version(api_version),
    );
    HeartbeatResponse::default()
        .with_error_code(error_code)
        .encode(&mut out, api_version)
        .expect("a Heartbeat response encodes in every version");
    header::finish_frame(&mut out);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Decodable;

    #[test]
    fn responses_carry_the_code_in_every_version() {
        for version in 0..=4 {
            let frame = response(version, 42, 27);
            assert_eq!(
                i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
                frame.len() - 4
            );
            assert_eq!(i32::from_be_bytes(frame[4..8].try_into().unwrap()), 42);
            let mut body = frame.slice(if version >= 4 { 9 } else { 8 }..);
            assert_eq!(
                HeartbeatResponse::decode(&mut body, version)
                    .unwrap()
                    .error_code,
                27
            );
        }
    }
}
