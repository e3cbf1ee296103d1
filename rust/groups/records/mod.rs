//! The coordinator's records in `__consumer_offsets`, in Kafka's formats so that Kafka's tools
//! read corral's log: offset commits, classic group metadata and the consumer-group records
//! (types 3, 5-8, 16). One schema table (schema.rs) drives both directions (codec.rs). The core's
//! offset records (offset_records.rs) and `corral analyze`'s decoder (analyze/decode_columns.rs)
//! use it; Python's encoders and decoders (groups/storage/) do not yet (issue 30 item 5).

pub(crate) mod codec;
pub(crate) mod schema;

#[cfg(test)]
mod tests;
