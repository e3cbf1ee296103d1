//! The few Kafka messages a classic consumer-group member sends, encoded and decoded by hand at
//! the versions `corral load` negotiates with corral and Kafka 4.x: ApiVersions v3, JoinGroup v9,
//! SyncGroup v5, Heartbeat v4 (all flexible: request header v2, compact strings, tagged fields),
//! and the embedded consumer protocol (ConsumerProtocolSubscription / Assignment v3) as
//! src/corral/load/consumer_protocol.py writes it.

pub const API_VERSIONS: i16 = 18;
pub const JOIN_GROUP: i16 = 11;
pub const SYNC_GROUP: i16 = 14;
pub const HEARTBEAT: i16 = 12;
pub const API_VERSIONS_V: i16 = 3;
pub const JOIN_GROUP_V: i16 = 9;
pub const SYNC_GROUP_V: i16 = 5;
pub const HEARTBEAT_V: i16 = 4;
pub const PROTOCOL_TYPE: &str = "consumer";
const CONSUMER_PROTOCOL_V: i16 = 3;

/// Topic -> partitions, in the order the assignor produced them.
pub type TopicPartitions = Vec<(String, Vec<i32>)>;

pub struct Writer(pub Vec<u8>);

impl Writer {
    fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn compact_str(&mut self, s: &str) {
        self.uvarint(s.len() as u32 + 1);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn compact_nullable_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.compact_str(s),
            None => self.uvarint(0),
        }
    }
    fn compact_bytes(&mut self, b: &[u8]) {
        self.uvarint(b.len() as u32 + 1);
        self.0.extend_from_slice(b);
    }
    fn no_tags(&mut self) {
        self.uvarint(0);
    }
    /// A classic (non-flexible) string: int16 length.
    fn str16(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.i16(s.len() as i16);
                self.0.extend_from_slice(s.as_bytes());
            }
            None => self.i16(-1),
        }
    }
}

/// A request frame (size prefix included) with request header v2.
fn request(api_key: i16, version: i16, correlation_id: i32, client_id: &str, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(128));
    w.i32(0); // size, filled below
    w.i16(api_key);
    w.i16(version);
    w.i32(correlation_id);
    w.str16(Some(client_id)); // the header's client id stays a classic string in v2
    w.no_tags();
    body(&mut w);
    let size = (w.0.len() - 4) as i32;
    w.0[..4].copy_from_slice(&size.to_be_bytes());
    w.0
}

pub fn api_versions(correlation_id: i32, client_id: &str) -> Vec<u8> {
    request(API_VERSIONS, API_VERSIONS_V, correlation_id, client_id, |w| {
        w.compact_str("corral-join-storm"); // client_software_name
        w.compact_str(env!("CARGO_PKG_VERSION"));
        w.no_tags();
    })
}

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

pub fn heartbeat(correlation_id: i32, client_id: &str, group: &str, generation: i32, member_id: &str) -> Vec<u8> {
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

pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

pub type Parse<T> = Result<T, String>;

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Parse<&'a [u8]> {
        if self.data.len() - self.pos < n {
            return Err(format!("truncated at byte {} (wanted {n} more)", self.pos));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    fn i8(&mut self) -> Parse<i8> {
        Ok(self.take(1)?[0] as i8)
    }
    pub fn i16(&mut self) -> Parse<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    pub fn i32(&mut self) -> Parse<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn uvarint(&mut self) -> Parse<u32> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }
    fn utf8(b: &[u8]) -> Parse<String> {
        String::from_utf8(b.to_vec()).map_err(|e| e.to_string())
    }
    fn compact_nullable_str(&mut self) -> Parse<Option<String>> {
        match self.uvarint()? {
            0 => Ok(None),
            n => Ok(Some(Self::utf8(self.take(n as usize - 1)?)?)),
        }
    }
    fn compact_str(&mut self) -> Parse<String> {
        self.compact_nullable_str()?.ok_or_else(|| "null string".to_string())
    }
    fn compact_bytes(&mut self) -> Parse<&'a [u8]> {
        match self.uvarint()? {
            0 => Ok(&[]),
            n => self.take(n as usize - 1),
        }
    }
    fn compact_len(&mut self) -> Parse<usize> {
        Ok((self.uvarint()? as usize).saturating_sub(1))
    }
    fn skip_tags(&mut self) -> Parse<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
    fn str16(&mut self) -> Parse<Option<String>> {
        match self.i16()? {
            n if n < 0 => Ok(None),
            n => Ok(Some(Self::utf8(self.take(n as usize)?)?)),
        }
    }
    fn topic_partitions(&mut self) -> Parse<TopicPartitions> {
        let n = self.i32()?.max(0);
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let topic = self.str16()?.unwrap_or_default();
            let count = self.i32()?.max(0);
            let parts = (0..count).map(|_| self.i32()).collect::<Parse<Vec<i32>>>()?;
            out.push((topic, parts));
        }
        Ok(out)
    }
}

/// The correlation id of a response frame (size prefix removed).
pub fn correlation_id(frame: &[u8]) -> Parse<i32> {
    Reader::new(frame).i32()
}

/// ApiVersions v3 answer (response header v0): error code and each API's highest version.
pub fn api_versions_answer(frame: &[u8]) -> Parse<(i16, Vec<(i16, i16)>)> {
    let mut r = Reader::new(frame);
    r.i32()?;
    let error = r.i16()?;
    if error != 0 {
        return Ok((error, Vec::new()));
    }
    let mut apis = Vec::new();
    for _ in 0..r.compact_len()? {
        let key = r.i16()?;
        r.i16()?;
        let max = r.i16()?;
        r.skip_tags()?;
        apis.push((key, max));
    }
    Ok((error, apis))
}

/// Reader positioned at the body of a flexible response (header v1: correlation id, tags).
fn flexible_body(frame: &[u8]) -> Parse<Reader<'_>> {
    let mut r = Reader::new(frame);
    r.i32()?;
    r.skip_tags()?;
    Ok(r)
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
    let protocol_name = r.compact_nullable_str()?;
    let leader = r.compact_str()?;
    r.i8()?; // skip_assignment (v9): only for KIP-848 upgrades, false here
    let member_id = r.compact_str()?;
    let mut members = Vec::new();
    for _ in 0..r.compact_len()? {
        let id = r.compact_str()?;
        r.compact_nullable_str()?; // group instance id
        let metadata = r.compact_bytes()?.to_vec();
        r.skip_tags()?;
        members.push((id, metadata));
    }
    Ok(JoinAnswer { error, generation, protocol_name, leader, member_id, members })
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
    (0..n).map(|_| Ok(r.str16()?.unwrap_or_default())).collect()
}

pub fn decode_assignment(data: &[u8]) -> Parse<TopicPartitions> {
    if data.is_empty() {
        return Ok(Vec::new()); // a member the leader gave nothing, as empty bytes
    }
    let mut r = Reader::new(data);
    r.i16()?;
    r.topic_partitions()
}

/// Kafka's RangeAssignor as consumer_protocol.assign("range") runs it: members sorted by id, per
/// topic consecutive ranges, the first `count % members` members one partition more; a topic a
/// member gets nothing of is left out of its assignment.
pub fn range_assign(subscriptions: &[(String, Vec<String>)], partitions: &[(String, i32)]) -> Vec<(String, TopicPartitions)> {
    let mut members: Vec<&(String, Vec<String>)> = subscriptions.iter().collect();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(String, TopicPartitions)> = members.iter().map(|m| (m.0.clone(), Vec::new())).collect();
    let mut topics: Vec<&(String, i32)> =
        partitions.iter().filter(|(t, _)| members.iter().any(|m| m.1.contains(t))).collect();
    topics.sort();
    for (topic, count) in topics {
        let subscribers: Vec<usize> = (0..members.len()).filter(|&k| members[k].1.contains(topic)).collect();
        let (per, extra) = (*count as usize / subscribers.len(), *count as usize % subscribers.len());
        let mut start = 0;
        for (i, &k) in subscribers.iter().enumerate() {
            let n = per + usize::from(i < extra);
            if n > 0 {
                out[k].1.push((topic.clone(), (start as i32..(start + n) as i32).collect()));
            }
            start += n;
        }
    }
    out
}
