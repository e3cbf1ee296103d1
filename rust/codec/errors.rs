//! Kafka's error codes, one table for Rust and Python: the kafka-protocol crate's `ResponseError`.
//! Rust code names codes as `ResponseError::X.code()`; Python's `corral.errors.ErrorCode` is
//! generated from `error_codes()` (ci/gen_error_codes.py) and a test keeps the two equal.

use kafka_protocol::ResponseError;
use pyo3::prelude::*;

/// Kafka's name of an error (`UNKNOWN_TOPIC_OR_PARTITION`), from the crate's variant name.
fn kafka_name(error: &ResponseError) -> String {
    let variant = format!("{error:?}");
    let mut name = String::with_capacity(variant.len() + 8);
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// Every error code the crate knows, as (Kafka's name, code), by code.
#[pyfunction]
pub fn error_codes() -> Vec<(String, i16)> {
    (i16::MIN..=i16::MAX)
        .filter_map(ResponseError::try_from_code)
        .filter(|e| !matches!(e, ResponseError::Unknown(_)))
        .map(|e| (kafka_name(&e), e.code()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kafkas() {
        let codes = error_codes();
        assert!(codes.contains(&("UNKNOWN_SERVER_ERROR".to_string(), -1)));
        assert!(codes.contains(&("UNKNOWN_TOPIC_OR_PARTITION".to_string(), 3)));
        assert!(codes.contains(&("KAFKA_STORAGE_ERROR".to_string(), 56)));
        assert!(codes.contains(&("FETCH_SESSION_ID_NOT_FOUND".to_string(), 70)));
        assert!(
            !codes.iter().any(|(_, code)| *code == 0),
            "0 is not an error"
        );
    }
}
