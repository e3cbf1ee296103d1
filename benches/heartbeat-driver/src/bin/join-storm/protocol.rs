//! The few Kafka messages a classic consumer-group member sends, encoded and decoded by hand at
//! the versions `corral load` negotiates with corral and Kafka 4.x: ApiVersions v3, JoinGroup v9,
//! SyncGroup v5, Heartbeat v4 (all flexible: request header v2, compact strings, tagged fields),
//! and the embedded consumer protocol (ConsumerProtocolSubscription / Assignment v3) as
//! src/corral/load/consumer_protocol.py writes it. The wire primitives and ApiVersions are
//! the crate's (wire.rs).

pub use heartbeat_driver::wire::{api_versions, api_versions_answer, correlation_id, Parse};
use heartbeat_driver::wire::{flexible_body, request, Reader, Writer};

pub const JOIN_GROUP: i16 = 11;
pub const SYNC_GROUP: i16 = 14;
pub const HEARTBEAT: i16 = 12;
pub const JOIN_GROUP_V: i16 = 9;
pub const SYNC_GROUP_V: i16 = 5;
pub const HEARTBEAT_V: i16 = 4;
pub const PROTOCOL_TYPE: &str = "consumer";
const CONSUMER_PROTOCOL_V: i16 = 3;

/// Topic -> partitions, in the order the assignor produced them.
pub type TopicPartitions = Vec<(String, Vec<i32>)>;

pub struct Join<'a> {
    pub group: &'a str,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub member_id: &'a str,
    pub assignor: &'a str,
    pub subscription: &'a [u8],
}

pub fn join_group(correlation_id: i32, client_id: &str, j: &Join) -> Vec<u8> {
    request(JOIN_GROUP, JOIN_GROUP_V, correlation_id, client_id, |w| {
        w.compact_str(j.group);
        w.i32(j.session_timeout_ms);
        w.i32(j.rebalance_timeout_ms);
        w.compact_str(j.member_id);
        w.compact_nullable_str(None); // group_instance_id: dynamic member
        w.compact_str(PROTOCOL_TYPE);
        w.uvarint(2); // one protocol
        w.compact_str(j.assignor);
        w.compact_bytes(j.subscription);
        w.no_tags();
        w.compact_nullable_str(None); // reason (v8+)
        w.no_tags();
    })
}

pub fn sync_group(
    correlation_id: i32,
    client_id: &str,
    group: &str,
    generation: i32,
    member_id: &str,
    protocol_name: Option<&str>,
    assignments: &[(String, Vec<u8>)],
) -> Vec<u8> {
    request(SYNC_GROUP, SYNC_GROUP_V, correlation_id, client_id, |w| {
        w.compact_str(group);
        w.i32(generation);
        w.compact_str(member_id);
        w.compact_nullable_str(None); // group_instance_id
        w.compact_nullable_str(Some(PROTOCOL_TYPE));
        w.compact_nullable_str(protocol_name);
        w.uvarint(assignments.len() as u32 + 1);
        for (member, assignment) in assignments {
            w.compact_str(member);
            w.compact_bytes(assignment);
            w.no_tags();
        }
        w.no_tags();
    })
}

pub fn heartbeat(
    correlation_id: i32,
    client_id: &str,
    group: &str,
    generation: i32,
    member_id: &str,
) -> Vec<u8> {
    request(HEARTBEAT, HEARTBEAT_V, correlation_id, client_id, |w| {
        w.compact_str(group);
        w.i32(generation);
        w.compact_str(member_id);
        w.compact_nullable_str(None); // group_instance_id
        w.no_tags();
    })
}

fn topic_partitions(w: &mut Writer, tps: &TopicPartitions) {
    w.i32(tps.len() as i32);
    for (topic, partitions) in tps {
        w.str16(Some(topic));
        w.i32(partitions.len() as i32);
        for &p in partitions {
            w.i32(p);
        }
    }
}

/// ConsumerProtocolSubscription v3: topics, no user data, owned partitions, generation, no rack.
pub fn subscription(topics: &[String], owned: &TopicPartitions, generation: i32) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.i16(CONSUMER_PROTOCOL_V);
    w.i32(topics.len() as i32);
    for t in topics {
        w.str16(Some(t));
    }
    w.i32(-1); // user data: null
    topic_partitions(&mut w, owned);
    w.i32(generation);
    w.str16(None); // rack id
    w.0
}

/// ConsumerProtocolAssignment v3: the partitions, no user data.
pub fn assignment(assigned: &TopicPartitions) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.i16(CONSUMER_PROTOCOL_V);
    topic_partitions(&mut w, assigned);
    w.i32(-1);
    w.0
}

pub struct JoinAnswer {
    pub error: i16,
    pub generation: i32,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, subscription bytes): filled for the leader only.
    pub members: Vec<(String, Vec<u8>)>,
}

pub fn join_answer(frame: &[u8]) -> Parse<JoinAnswer> {
    let mut r = flexible_body(frame)?;
    r.i32()?; // throttle
    let error = r.i16()?;
    let generation = r.i32()?;
    r.compact_nullable_str()?; // protocol type
    let protocol_name = r.compact_nullable_str()?.map(String::from);
    let leader = r.compact_str()?.to_string();
    r.i8()?; // skip_assignment (v9): only for KIP-848 upgrades, false here
    let member_id = r.compact_str()?.to_string();
    let mut members = Vec::new();
    for _ in 0..r.compact_len()? {
        let id = r.compact_str()?.to_string();
        r.compact_nullable_str()?; // group instance id
        let metadata = r.compact_bytes()?.to_vec();
        r.skip_tags()?;
        members.push((id, metadata));
    }
    Ok(JoinAnswer {
        error,
        generation,
        protocol_name,
        leader,
        member_id,
        members,
    })
}

/// SyncGroup v5 answer: error code and the assignment bytes.
pub fn sync_answer(frame: &[u8]) -> Parse<(i16, Vec<u8>)> {
    let mut r = flexible_body(frame)?;
    r.i32()?;
    let error = r.i16()?;
    r.compact_nullable_str()?;
    r.compact_nullable_str()?;
    Ok((error, r.compact_bytes()?.to_vec()))
}

/// Heartbeat v4 answer: its error code.
pub fn heartbeat_answer(frame: &[u8]) -> Parse<i16> {
    let mut r = flexible_body(frame)?;
    r.i32()?;
    r.i16()
}

pub fn subscription_topics(data: &[u8]) -> Parse<Vec<String>> {
    let mut r = Reader::new(data);
    r.i16()?;
    let n = r.i32()?.max(0);
    (0..n)
        .map(|_| Ok(r.str16()?.unwrap_or_default().to_string()))
        .collect()
}

pub fn decode_assignment(data: &[u8]) -> Parse<TopicPartitions> {
    if data.is_empty() {
        return Ok(Vec::new()); // a member the leader gave nothing, as empty bytes
    }
    let mut r = Reader::new(data);
    r.i16()?;
    read_topic_partitions(&mut r)
}

fn read_topic_partitions(r: &mut Reader) -> Parse<TopicPartitions> {
    let n = r.i32()?.max(0);
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let topic = r.str16()?.unwrap_or_default().to_string();
        let count = r.i32()?.max(0);
        let parts = (0..count).map(|_| r.i32()).collect::<Parse<Vec<i32>>>()?;
        out.push((topic, parts));
    }
    Ok(out)
}

/// Kafka's RangeAssignor as consumer_protocol.assign("range") runs it: members sorted by id, per
/// topic consecutive ranges, the first `count % members` members one partition more; a topic a
/// member gets nothing of is left out of its assignment.
pub fn range_assign(
    subscriptions: &[(String, Vec<String>)],
    partitions: &[(String, i32)],
) -> Vec<(String, TopicPartitions)> {
    let mut members: Vec<&(String, Vec<String>)> = subscriptions.iter().collect();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(String, TopicPartitions)> =
        members.iter().map(|m| (m.0.clone(), Vec::new())).collect();
    let mut topics: Vec<&(String, i32)> = partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.1.contains(t)))
        .collect();
    topics.sort();
    for (topic, count) in topics {
        let subscribers: Vec<usize> = (0..members.len())
            .filter(|&k| members[k].1.contains(topic))
            .collect();
        let (per, extra) = (
            *count as usize / subscribers.len(),
            *count as usize % subscribers.len(),
        );
        let mut start = 0;
        for (i, &k) in subscribers.iter().enumerate() {
            let n = per + usize::from(i < extra);
            if n > 0 {
                out[k]
                    .1
                    .push((topic.clone(), (start as i32..(start + n) as i32).collect()));
            }
            start += n;
        }
    }
    out
}
