//! The coordinator's records in `__consumer_offsets`, in Kafka's formats so that Kafka's tools
//! read corral's log: offset commits, classic group metadata and the consumer-group records
//! (types 3, 5-8, 16). One schema table (schema.rs) drives both directions (codec.rs). The core's
//! offset records (offset_records.rs) and `corral analyze`'s decoder (analyze/decode_columns.rs)
//! use it, and so does Python (python_api.rs) for the named records of groups/storage/.

pub(crate) mod codec;
pub(crate) mod python_api;
pub(crate) mod schema;

#[cfg(test)]
mod tests;
