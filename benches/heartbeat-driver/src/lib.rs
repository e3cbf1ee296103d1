//! What the drivers of this crate have in common (src/main.rs heartbeat-driver, src/bin/join-storm,
//! src/bin/consumer-driver): one copy of the system calls, socket plumbing, Kafka wire primitives
//! and command line they all use, so that a fix to one is a fix to all.

pub mod args;
pub mod schedule;
pub mod socket;
pub mod sys;
pub mod wire;
