//! The one schema table of the coordinator's records in `__consumer_offsets`, as Kafka's JSON
//! schemas declare them (apache/kafka group-coordinator/src/main/resources/common/message/):
//! every record type's key and value fields, with the versions each field exists in, its
//! nullability, default and tag. codec.rs encodes and decodes every record from it.

/// A field's type.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    Int8,
    Int16,
    Int32,
    Int64,
    String,
    Bytes,
    Uuid,
    /// An array of this type.
    Array(&'static Ty),
    /// A struct of these fields.
    Struct(&'static [Field]),
}

#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    /// The value versions the field exists in (inclusive).
    pub versions: (i16, i16),
    pub nullable: bool,
    /// The value of an integer field where it does not exist or its tag is absent.
    pub default: i64,
    /// Tagged (flexible versions only): its tag.
    pub tag: Option<u32>,
}

const ALL: (i16, i16) = (0, i16::MAX);

const fn field(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        versions: ALL,
        nullable: false,
        default: 0,
        tag: None,
    }
}

const fn nullable(name: &'static str, ty: Ty) -> Field {
    Field {
        nullable: true,
        ..field(name, ty)
    }
}

const fn since(version: i16, default: i64, f: Field) -> Field {
    Field {
        versions: (version, i16::MAX),
        default,
        ..f
    }
}

const fn tagged(tag: u32, f: Field) -> Field {
    Field {
        tag: Some(tag),
        ..f
    }
}

/// A record type: its key's leading int16s, its key and value structs, the value versions read
/// and from which one the value is flexible.
pub struct RecordType {
    pub types: &'static [i16],
    pub key: &'static [Field],
    pub value: &'static [Field],
    pub value_versions: (i16, i16),
    pub flexible_from: i16,
}

impl RecordType {
    pub fn flexible(&self, version: i16) -> bool {
        version >= self.flexible_from
    }
}

const INT32S: Ty = Ty::Array(&Ty::Int32);
const STRINGS: Ty = Ty::Array(&Ty::String);
const GROUP: &[Field] = &[field("group", Ty::String)];
const GROUP_AND_NAME: &[Field] = &[field("group", Ty::String), field("name", Ty::String)];

pub const OFFSET_COMMIT_KEY_V0: i16 = 0;
pub const OFFSET_COMMIT_KEY: i16 = 1;
pub const GROUP_METADATA_KEY: i16 = 2;
pub const GROUP_EPOCH: i16 = 3;
pub const PARTITION_METADATA: i16 = 4;
pub const MEMBER_METADATA: i16 = 5;
pub const TARGET_EPOCH: i16 = 6;
pub const TARGET_MEMBER: i16 = 7;
pub const CURRENT_ASSIGNMENT: i16 = 8;
pub const REGEX: i16 = 16;
pub const SHARE_MEMBER_METADATA: i16 = 10;
pub const SHARE_GROUP_METADATA: i16 = 11;
pub const SHARE_TARGET_EPOCH: i16 = 12;
pub const SHARE_TARGET_MEMBER: i16 = 13;
pub const SHARE_CURRENT_ASSIGNMENT: i16 = 14;
pub const SHARE_STATE_PARTITIONS: i16 = 15;
// `__share_group_state`'s own record types (a table of their own: they reuse 0 and 1).
pub const SHARE_SNAPSHOT: i16 = 0;
pub const SHARE_UPDATE: i16 = 1;

/// OffsetCommitKey / OffsetCommitValue v0-4 (flexible from v4; expireTimestamp in v1 only).
pub const OFFSET_COMMIT: RecordType = RecordType {
    types: &[OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY],
    key: &[
        field("group", Ty::String),
        field("topic", Ty::String),
        field("partition", Ty::Int32),
    ],
    value: &[
        field("offset", Ty::Int64),
        since(3, -1, field("leader_epoch", Ty::Int32)),
        field("metadata", Ty::String),
        field("commit_timestamp", Ty::Int64),
        Field {
            versions: (1, 1),
            default: -1,
            ..field("expire_timestamp", Ty::Int64)
        },
        since(4, 0, tagged(0, field("topic_id", Ty::Uuid))),
    ],
    value_versions: (0, 4),
    flexible_from: 4,
};

const GROUP_MEMBER: &[Field] = &[
    field("member_id", Ty::String),
    since(3, 0, nullable("group_instance_id", Ty::String)),
    field("client_id", Ty::String),
    field("client_host", Ty::String),
    since(1, -1, field("rebalance_timeout", Ty::Int32)),
    field("session_timeout", Ty::Int32),
    field("subscription", Ty::Bytes),
    field("assignment", Ty::Bytes),
];

/// GroupMetadataKey / GroupMetadataValue v0-4 (flexible from v4).
pub const GROUP_METADATA: RecordType = RecordType {
    types: &[GROUP_METADATA_KEY],
    key: GROUP,
    value: &[
        field("protocol_type", Ty::String),
        field("generation", Ty::Int32),
        nullable("protocol", Ty::String),
        nullable("leader", Ty::String),
        since(2, -1, field("current_state_timestamp", Ty::Int64)),
        field("members", Ty::Array(&Ty::Struct(GROUP_MEMBER))),
    ],
    value_versions: (0, 4),
    flexible_from: 4,
};

/// ConsumerGroupMetadataKey / Value.
pub const CONSUMER_GROUP_METADATA: RecordType = consumer(
    GROUP_EPOCH,
    GROUP,
    &[
        field("epoch", Ty::Int32),
        tagged(0, field("metadata_hash", Ty::Int64)),
    ],
);

/// ConsumerGroupPartitionMetadataKey (obsolete since Kafka 4.1: its value is not read).
pub const CONSUMER_PARTITION_METADATA: RecordType = consumer(PARTITION_METADATA, GROUP, &[]);

const CLASSIC_PROTOCOL: &[Field] = &[field("name", Ty::String), field("metadata", Ty::Bytes)];
const CLASSIC_MEMBER: &[Field] = &[
    field("session_timeout_ms", Ty::Int32),
    field(
        "supported_protocols",
        Ty::Array(&Ty::Struct(CLASSIC_PROTOCOL)),
    ),
];

/// ConsumerGroupMemberMetadataKey / Value.
pub const CONSUMER_MEMBER_METADATA: RecordType = consumer(
    MEMBER_METADATA,
    GROUP_AND_NAME,
    &[
        nullable("instance_id", Ty::String),
        nullable("rack_id", Ty::String),
        field("client_id", Ty::String),
        field("client_host", Ty::String),
        field("subscribed_topic_names", STRINGS),
        nullable("subscribed_topic_regex", Ty::String),
        field("rebalance_timeout_ms", Ty::Int32),
        nullable("server_assignor", Ty::String),
        // Absent: the empty struct (Kafka's generated code leaves its default out).
        tagged(
            0,
            nullable("classic_member_metadata", Ty::Struct(CLASSIC_MEMBER)),
        ),
    ],
);

/// ConsumerGroupTargetAssignmentMetadataKey / Value.
pub const CONSUMER_TARGET_EPOCH: RecordType = consumer(
    TARGET_EPOCH,
    GROUP,
    &[
        field("assignment_epoch", Ty::Int32),
        tagged(0, field("assignment_timestamp_ms", Ty::Int64)),
    ],
);

const TARGET_TOPIC: &[Field] = &[field("topic_id", Ty::Uuid), field("partitions", INT32S)];

/// ConsumerGroupTargetAssignmentMemberKey / Value.
pub const CONSUMER_TARGET_MEMBER: RecordType = consumer(
    TARGET_MEMBER,
    GROUP_AND_NAME,
    &[field(
        "topic_partitions",
        Ty::Array(&Ty::Struct(TARGET_TOPIC)),
    )],
);

/// A current assignment's topic: its AssignmentEpochs are KIP-1251's (Kafka 4.3+).
const CURRENT_TOPIC: &[Field] = &[
    field("topic_id", Ty::Uuid),
    field("partitions", INT32S),
    tagged(0, nullable("assignment_epochs", INT32S)),
];

/// ConsumerGroupCurrentMemberAssignmentKey / Value.
pub const CONSUMER_CURRENT_ASSIGNMENT: RecordType = consumer(
    CURRENT_ASSIGNMENT,
    GROUP_AND_NAME,
    &[
        field("member_epoch", Ty::Int32),
        field("previous_member_epoch", Ty::Int32),
        field("state", Ty::Int8),
        field("assigned_partitions", Ty::Array(&Ty::Struct(CURRENT_TOPIC))),
        field(
            "partitions_pending_revocation",
            Ty::Array(&Ty::Struct(CURRENT_TOPIC)),
        ),
    ],
);

/// ConsumerGroupRegularExpressionKey / Value.
pub const CONSUMER_REGEX: RecordType = consumer(
    REGEX,
    GROUP_AND_NAME,
    &[
        field("topics", STRINGS),
        field("version", Ty::Int64),
        field("timestamp_ms", Ty::Int64),
    ],
);

/// ShareGroupMemberMetadataKey / Value.
pub const SHARE_GROUP_MEMBER_METADATA: RecordType = consumer(
    SHARE_MEMBER_METADATA,
    GROUP_AND_NAME,
    &[
        nullable("rack_id", Ty::String),
        field("client_id", Ty::String),
        field("client_host", Ty::String),
        field("subscribed_topic_names", STRINGS),
    ],
);

/// ShareGroupMetadataKey / Value.
pub const SHARE_GROUP_METADATA_RECORD: RecordType = consumer(
    SHARE_GROUP_METADATA,
    GROUP,
    &[field("epoch", Ty::Int32), field("metadata_hash", Ty::Int64)],
);

/// ShareGroupTargetAssignmentMetadataKey / Value.
pub const SHARE_GROUP_TARGET_EPOCH: RecordType = consumer(
    SHARE_TARGET_EPOCH,
    GROUP,
    &[
        field("assignment_epoch", Ty::Int32),
        tagged(0, field("assignment_timestamp_ms", Ty::Int64)),
    ],
);

/// ShareGroupTargetAssignmentMemberKey / Value.
pub const SHARE_GROUP_TARGET_MEMBER: RecordType = consumer(
    SHARE_TARGET_MEMBER,
    GROUP_AND_NAME,
    &[field(
        "topic_partitions",
        Ty::Array(&Ty::Struct(TARGET_TOPIC)),
    )],
);

/// ShareGroupCurrentMemberAssignmentKey / Value.
pub const SHARE_GROUP_CURRENT_ASSIGNMENT: RecordType = consumer(
    SHARE_CURRENT_ASSIGNMENT,
    GROUP_AND_NAME,
    &[
        field("member_epoch", Ty::Int32),
        field("previous_member_epoch", Ty::Int32),
        field("state", Ty::Int8),
        field("assigned_partitions", Ty::Array(&Ty::Struct(TARGET_TOPIC))),
    ],
);

const TOPIC_PARTITIONS_INFO: &[Field] = &[
    field("topic_id", Ty::Uuid),
    field("topic_name", Ty::String),
    field("partitions", INT32S),
];
const TOPIC_INFO: &[Field] = &[field("topic_id", Ty::Uuid), field("topic_name", Ty::String)];

/// ShareGroupStatePartitionMetadataKey / Value.
pub const SHARE_GROUP_STATE_PARTITIONS: RecordType = consumer(
    SHARE_STATE_PARTITIONS,
    GROUP,
    &[
        field(
            "initializing_topics",
            Ty::Array(&Ty::Struct(TOPIC_PARTITIONS_INFO)),
        ),
        field(
            "initialized_topics",
            Ty::Array(&Ty::Struct(TOPIC_PARTITIONS_INFO)),
        ),
        field("deleting_topics", Ty::Array(&Ty::Struct(TOPIC_INFO))),
    ],
);

const SHARE_STATE_KEY: &[Field] = &[
    field("group", Ty::String),
    field("topic_id", Ty::Uuid),
    field("partition", Ty::Int32),
];
const STATE_BATCH: &[Field] = &[
    field("first_offset", Ty::Int64),
    field("last_offset", Ty::Int64),
    field("delivery_state", Ty::Int8),
    field("delivery_count", Ty::Int16),
];

/// ShareSnapshotKey / Value (`__share_group_state`).
pub const SHARE_SNAPSHOT_RECORD: RecordType = consumer(
    SHARE_SNAPSHOT,
    SHARE_STATE_KEY,
    &[
        field("snapshot_epoch", Ty::Int32),
        field("state_epoch", Ty::Int32),
        field("leader_epoch", Ty::Int32),
        field("start_offset", Ty::Int64),
        Field {
            default: -1,
            ..tagged(0, field("delivery_complete_count", Ty::Int32))
        },
        field("create_timestamp", Ty::Int64),
        field("write_timestamp", Ty::Int64),
        field("state_batches", Ty::Array(&Ty::Struct(STATE_BATCH))),
    ],
);

/// ShareUpdateKey / Value (`__share_group_state`).
pub const SHARE_UPDATE_RECORD: RecordType = consumer(
    SHARE_UPDATE,
    SHARE_STATE_KEY,
    &[
        field("snapshot_epoch", Ty::Int32),
        field("leader_epoch", Ty::Int32),
        field("start_offset", Ty::Int64),
        Field {
            default: -1,
            ..tagged(0, field("delivery_complete_count", Ty::Int32))
        },
        field("state_batches", Ty::Array(&Ty::Struct(STATE_BATCH))),
    ],
);

/// A consumer group's record type: value v0 only, flexible.
const fn consumer(kind: i16, key: &'static [Field], value: &'static [Field]) -> RecordType {
    // A const fn cannot build the slice of `types` from `kind`: one static per type.
    let types: &'static [i16] = match kind {
        GROUP_EPOCH => &[GROUP_EPOCH],
        PARTITION_METADATA => &[PARTITION_METADATA],
        MEMBER_METADATA => &[MEMBER_METADATA],
        TARGET_EPOCH => &[TARGET_EPOCH],
        TARGET_MEMBER => &[TARGET_MEMBER],
        CURRENT_ASSIGNMENT => &[CURRENT_ASSIGNMENT],
        SHARE_MEMBER_METADATA => &[SHARE_MEMBER_METADATA],
        SHARE_GROUP_METADATA => &[SHARE_GROUP_METADATA],
        SHARE_TARGET_EPOCH => &[SHARE_TARGET_EPOCH],
        SHARE_TARGET_MEMBER => &[SHARE_TARGET_MEMBER],
        SHARE_CURRENT_ASSIGNMENT => &[SHARE_CURRENT_ASSIGNMENT],
        SHARE_STATE_PARTITIONS => &[SHARE_STATE_PARTITIONS],
        // `__share_group_state`'s (SHARE_SNAPSHOT is OFFSET_COMMIT_KEY_V0's number).
        SHARE_SNAPSHOT => &[SHARE_SNAPSHOT],
        SHARE_UPDATE => &[SHARE_UPDATE],
        _ => &[REGEX],
    };
    RecordType {
        types,
        key,
        value,
        value_versions: (0, 0),
        flexible_from: 0,
    }
}

/// Every record type corral reads and writes.
pub const RECORD_TYPES: &[&RecordType] = &[
    &OFFSET_COMMIT,
    &GROUP_METADATA,
    &CONSUMER_GROUP_METADATA,
    &CONSUMER_PARTITION_METADATA,
    &CONSUMER_MEMBER_METADATA,
    &CONSUMER_TARGET_EPOCH,
    &CONSUMER_TARGET_MEMBER,
    &CONSUMER_CURRENT_ASSIGNMENT,
    &CONSUMER_REGEX,
    &SHARE_GROUP_MEMBER_METADATA,
    &SHARE_GROUP_METADATA_RECORD,
    &SHARE_GROUP_TARGET_EPOCH,
    &SHARE_GROUP_TARGET_MEMBER,
    &SHARE_GROUP_CURRENT_ASSIGNMENT,
    &SHARE_GROUP_STATE_PARTITIONS,
];

/// `__share_group_state`'s record types.
pub const SHARE_STATE_RECORD_TYPES: &[&RecordType] =
    &[&SHARE_SNAPSHOT_RECORD, &SHARE_UPDATE_RECORD];

/// The record type of a key's leading int16 in one topic's table.
pub fn record_type_in(table: &[&'static RecordType], kind: i16) -> Option<&'static RecordType> {
    table.iter().copied().find(|t| t.types.contains(&kind))
}
