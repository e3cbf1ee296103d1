//! The two messages a KIP-848 consumer sends to its coordinator, encoded and decoded by hand:
//! ApiVersions v3 (the handshake on a new connection) and ConsumerGroupHeartbeat v0/v1 (API 68,
//! flexible in every version: request header v2, compact strings and arrays, tagged fields).
//! Field order as in Kafka's ConsumerGroupHeartbeatRequest/Response.json. The wire primitives are
//! the crate's (wire.rs).

#[cfg(test)]
use heartbeat_driver::wire::Writer;
pub use heartbeat_driver::wire::{api_versions, correlation_id, Parse};
use heartbeat_driver::wire::{flexible_body, request};

pub const CONSUMER_GROUP_HEARTBEAT: i16 = 68;

/// A topic id (Kafka Uuid, 16 bytes) and partitions: one entry of TopicPartitions.
pub type TopicId = [u8; 16];

/// What one ConsumerGroupHeartbeat carries. `full` fields (rebalance timeout, topics, assignor)
/// go only with a join or after a lost answer, as Java's HeartbeatState sends them; `owned` only
/// when it changed since last reported (None: "unchanged").
pub struct Heartbeat<'a> {
    pub group: &'a str,
    pub member_id: &'a str,
    pub epoch: i32,
    pub instance_id: Option<&'a str>,
    pub full: Option<Full<'a>>,
    pub owned: Option<&'a [(TopicId, Vec<i32>)]>,
}

pub struct Full<'a> {
    pub rebalance_timeout_ms: i32,
    pub topics: &'a [String],
    pub server_assignor: Option<&'a str>,
}

pub fn consumer_group_heartbeat(
    version: i16,
    correlation_id: i32,
    client_id: &str,
    h: &Heartbeat,
) -> Vec<u8> {
    request(
        CONSUMER_GROUP_HEARTBEAT,
        version,
        correlation_id,
        client_id,
        |w| {
            w.compact_str(h.group);
            w.compact_str(h.member_id);
            w.i32(h.epoch);
            w.compact_nullable_str(h.instance_id);
            w.compact_nullable_str(None); // rack id
            w.i32(h.full.as_ref().map_or(-1, |f| f.rebalance_timeout_ms));
            match &h.full {
                Some(f) => {
                    w.uvarint(f.topics.len() as u32 + 1);
                    f.topics.iter().for_each(|t| w.compact_str(t));
                }
                None => w.uvarint(0),
            }
            if version >= 1 {
                w.compact_nullable_str(None); // subscribed topic regex
            }
            w.compact_nullable_str(h.full.as_ref().and_then(|f| f.server_assignor));
            match h.owned {
                Some(owned) => {
                    w.uvarint(owned.len() as u32 + 1);
                    for (topic_id, partitions) in owned {
                        w.0.extend_from_slice(topic_id);
                        w.uvarint(partitions.len() as u32 + 1);
                        partitions.iter().for_each(|&p| w.i32(p));
                        w.no_tags();
                    }
                }
                None => w.uvarint(0),
            }
            w.no_tags();
        },
    )
}

/// ApiVersions v3 answer: error code and the highest version of `api` (None: not offered).
pub fn api_versions_answer(frame: &[u8], api: i16) -> Parse<(i16, Option<i16>)> {
    let (error, apis) = heartbeat_driver::wire::api_versions_answer(frame)?;
    Ok((
        error,
        apis.iter()
            .rev()
            .find(|&&(key, _)| key == api)
            .map(|&(_, max)| max),
    ))
}

pub struct Answer<'a> {
    pub error: i16,
    pub error_message: Option<&'a str>,
    pub member_id: Option<&'a str>,
    pub epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// None: the assignment is unchanged. Partitions per topic as the broker sent them.
    pub assignment: Option<Vec<(TopicId, Vec<i32>)>>,
}

/// ConsumerGroupHeartbeat v0/v1 answer (response header v1: correlation id, tags).
pub fn heartbeat_answer(frame: &[u8]) -> Parse<Answer<'_>> {
    let mut r = flexible_body(frame)?;
    r.i32()?; // throttle time
    let error = r.i16()?;
    let error_message = r.compact_nullable_str()?;
    let member_id = r.compact_nullable_str()?;
    let epoch = r.i32()?;
    let heartbeat_interval_ms = r.i32()?;
    let assignment = match r.i8()? {
        -1 => None,
        _ => {
            let n = r.compact_len()?;
            let mut topics = Vec::with_capacity(n);
            for _ in 0..n {
                let id: TopicId = r.take(16)?.try_into().unwrap();
                let count = r.compact_len()?;
                let partitions = (0..count).map(|_| r.i32()).collect::<Parse<Vec<i32>>>()?;
                r.skip_tags()?;
                topics.push((id, partitions));
            }
            r.skip_tags()?; // the Assignment struct's
            Some(topics)
        }
    };
    Ok(Answer {
        error,
        error_message,
        member_id,
        epoch,
        heartbeat_interval_ms,
        assignment,
    })
}

/// Kafka's error names for the codes a ConsumerGroupHeartbeat can answer.
pub fn error_name(code: i16) -> String {
    let name = match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        7 => "REQUEST_TIMED_OUT",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        25 => "UNKNOWN_MEMBER_ID",
        30 => "GROUP_AUTHORIZATION_FAILED",
        35 => "UNSUPPORTED_VERSION",
        42 => "INVALID_REQUEST",
        69 => "GROUP_ID_NOT_FOUND",
        81 => "GROUP_MAX_SIZE_REACHED",
        82 => "FENCED_INSTANCE_ID",
        110 => "FENCED_MEMBER_EPOCH",
        111 => "UNRELEASED_INSTANCE_ID",
        112 => "UNSUPPORTED_ASSIGNOR",
        113 => "STALE_MEMBER_EPOCH",
        _ => return code.to_string(),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_with_assignment_decodes() {
        let mut w = Writer(Vec::new());
        w.i32(7); // correlation id
        w.no_tags();
        w.i32(0);
        w.i16(0);
        w.compact_nullable_str(None);
        w.compact_nullable_str(Some("m-1"));
        w.i32(3);
        w.i32(5000);
        w.i8(1);
        w.uvarint(2);
        w.0.extend_from_slice(&[9; 16]);
        w.uvarint(3);
        w.i32(4);
        w.i32(5);
        w.no_tags();
        w.no_tags();
        w.no_tags();
        let a = heartbeat_answer(&w.0).unwrap();
        assert_eq!(
            (a.error, a.member_id, a.epoch, a.heartbeat_interval_ms),
            (0, Some("m-1"), 3, 5000)
        );
        assert_eq!(a.assignment, Some(vec![([9; 16], vec![4, 5])]));
    }

    #[test]
    fn incremental_heartbeat_is_small() {
        let h = Heartbeat {
            group: "g",
            member_id: "m",
            epoch: 4,
            instance_id: None,
            full: None,
            owned: None,
        };
        let frame = consumer_group_heartbeat(1, 1, "c", &h);
        // header 4+2+2+4+(2+1)+1, body 2+2+4+1+1+4+1+1+1+1+1
        assert_eq!(frame.len(), 16 + 19);
        assert_eq!(&frame[frame.len() - 6..], &[0xff, 0, 0, 0, 0, 0]);
    }
}
