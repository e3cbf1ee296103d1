//! Kafka's embedded consumer protocol: the subscription (ConsumerProtocolSubscription) a classic
//! "consumer" member puts in its JoinGroup metadata and the assignment
//! (ConsumerProtocolAssignment) its SyncGroup carries, with the kafka-protocol crate's schemas.
//! Both are an int16 version, then the message in that version. A version above the newest the
//! crate knows is read as the newest, as Kafka's ConsumerProtocol does (newer fields come after).

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    self as assignment, ConsumerProtocolAssignment,
};
use kafka_protocol::messages::consumer_protocol_subscription::{
    self as subscription, ConsumerProtocolSubscription,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// (topic, partitions) pairs, in the order given.
pub type TopicPartitions = Vec<(String, Vec<i32>)>;

const NEWEST: i16 = 3;

fn name(topic: String) -> TopicName {
    TopicName(StrBytes::from_string(topic))
}

fn invalid(what: &str, e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("not a consumer protocol {what}: {e}"))
}

/// The version prefix, and the version to read the rest with.
fn read_version(data: &mut Bytes, what: &str) -> PyResult<(i16, i16)> {
    if data.len() < 2 {
        return Err(invalid(what, "shorter than its version"));
    }
    let version = data.get_i16();
    if version < 0 {
        return Err(invalid(what, format!("version {version}")));
    }
    Ok((version, version.min(NEWEST)))
}

fn encoded<'py>(
    py: Python<'py>,
    version: i16,
    message: &impl Encodable,
    what: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    if !(0..=NEWEST).contains(&version) {
        return Err(PyValueError::new_err(format!(
            "consumer protocol {what} version {version} is not in 0..={NEWEST}"
        )));
    }
    let mut out = BytesMut::new();
    out.extend_from_slice(&version.to_be_bytes());
    message
        .encode(&mut out, version)
        .map_err(|e| invalid(what, e))?;
    Ok(PyBytes::new(py, &out))
}

/// A subscription's bytes: `version` (0-3), subscribed topics, owned partitions (v1+),
/// generation (v2+), rack (v3+); no user data.
#[pyfunction]
#[pyo3(signature = (version, topics, owned_partitions, generation_id = -1, rack_id = None))]
pub fn encode_consumer_subscription<'py>(
    py: Python<'py>,
    version: i16,
    topics: Vec<String>,
    owned_partitions: TopicPartitions,
    generation_id: i32,
    rack_id: Option<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let message = ConsumerProtocolSubscription::default()
        .with_topics(topics.into_iter().map(StrBytes::from_string).collect())
        .with_owned_partitions(
            owned_partitions
                .into_iter()
                .map(|(t, ps)| {
                    subscription::TopicPartition::default()
                        .with_topic(name(t))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_generation_id(generation_id)
        .with_rack_id(rack_id.map(StrBytes::from_string));
    encoded(py, version, &message, "subscription")
}

/// (version, topics, owned partitions, generation id, rack id) of a subscription.
type Subscription = (i16, Vec<String>, TopicPartitions, i32, Option<String>);

/// A subscription's fields (`Subscription`); raises ValueError when the bytes are not one.
#[pyfunction]
pub fn decode_consumer_subscription(data: &[u8]) -> PyResult<Subscription> {
    let mut buf = Bytes::copy_from_slice(data);
    let (version, read_as) = read_version(&mut buf, "subscription")?;
    let message = ConsumerProtocolSubscription::decode(&mut buf, read_as)
        .map_err(|e| invalid("subscription", e))?;
    Ok((
        version,
        message.topics.into_iter().map(|t| t.to_string()).collect(),
        message
            .owned_partitions
            .into_iter()
            .map(|tp| (tp.topic.0.to_string(), tp.partitions))
            .collect(),
        message.generation_id,
        message.rack_id.map(|r| r.to_string()),
    ))
}

/// An assignment's bytes: `version` (0-3) and the assigned partitions; no user data.
#[pyfunction]
pub fn encode_consumer_assignment<'py>(
    py: Python<'py>,
    version: i16,
    assigned: TopicPartitions,
) -> PyResult<Bound<'py, PyBytes>> {
    let message = ConsumerProtocolAssignment::default().with_assigned_partitions(
        assigned
            .into_iter()
            .map(|(t, ps)| {
                assignment::TopicPartition::default()
                    .with_topic(name(t))
                    .with_partitions(ps)
            })
            .collect(),
    );
    encoded(py, version, &message, "assignment")
}

/// The assigned partitions of an assignment and its user data (a custom assignor's; None when
/// absent or empty); raises ValueError when the bytes are not an assignment.
#[pyfunction]
pub fn decode_consumer_assignment<'py>(
    py: Python<'py>,
    data: &[u8],
) -> PyResult<(TopicPartitions, Option<Bound<'py, PyBytes>>)> {
    let mut buf = Bytes::copy_from_slice(data);
    let (_, read_as) = read_version(&mut buf, "assignment")?;
    let message = ConsumerProtocolAssignment::decode(&mut buf, read_as)
        .map_err(|e| invalid("assignment", e))?;
    let user_data = message
        .user_data
        .filter(|d| !d.is_empty())
        .map(|d| PyBytes::new(py, &d));
    Ok((
        message
            .assigned_partitions
            .into_iter()
            .map(|tp| (tp.topic.0.to_string(), tp.partitions))
            .collect(),
        user_data,
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_consumer_subscription, m)?)?;
    m.add_function(wrap_pyfunction!(decode_consumer_subscription, m)?)?;
    m.add_function(wrap_pyfunction!(encode_consumer_assignment, m)?)?;
    m.add_function(wrap_pyfunction!(decode_consumer_assignment, m)?)?;
    Ok(())
}
