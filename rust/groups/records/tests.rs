use super::codec::{
    decode_key, decode_value, default, encode_key, encode_value, is_default, Value,
};
use super::schema::{self, record_type_in, RECORD_TYPES};

fn s(text: &str) -> Value {
    Value::Str(Some(text.to_owned()))
}

fn round_trip(kind: i16, key: Vec<Value>, version: i16, value: Vec<Value>) -> (Vec<u8>, Vec<u8>) {
    let t = record_type_in(RECORD_TYPES, kind).unwrap();
    let k = encode_key(kind, t, &key).unwrap();
    let v = encode_value(t, version, &value).unwrap();
    assert_eq!(decode_key(&k).unwrap(), (kind, Some(key)));
    assert_eq!(decode_value(t, &v).unwrap(), (version, value));
    (k, v)
}

#[test]
fn offset_commits_are_kafkas_bytes() {
    let key = vec![s("g"), s("t"), Value::Int(3)];
    let value = vec![
        Value::Int(42),
        Value::Int(5),
        s("m"),
        Value::Int(1000),
        Value::Int(-1),
        Value::Uuid([0; 16]),
    ];
    let (k, v) = round_trip(1, key, 3, value);
    assert_eq!(k, b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03");
    let mut want = vec![0, 3];
    want.extend_from_slice(&42i64.to_be_bytes());
    want.extend_from_slice(&5i32.to_be_bytes());
    want.extend_from_slice(b"\x00\x01m");
    want.extend_from_slice(&1000i64.to_be_bytes());
    assert_eq!(v, want);
    // v1 carries the expiry and no leader epoch, which reads back as -1.
    let v1 = encode_value(
        &schema::OFFSET_COMMIT,
        1,
        &[
            Value::Int(42),
            Value::Int(5),
            s(""),
            Value::Int(1000),
            Value::Int(2000),
            Value::Uuid([0; 16]),
        ],
    )
    .unwrap();
    let (_, read) = decode_value(&schema::OFFSET_COMMIT, &v1).unwrap();
    assert_eq!(read[1], Value::Int(-1));
    assert_eq!(read[4], Value::Int(2000));
}

#[test]
fn tagged_fields_at_their_default_are_left_out() {
    let (_, v) = round_trip(3, vec![s("g")], 0, vec![Value::Int(7), Value::Int(0)]);
    assert_eq!(v, b"\x00\x00\x00\x00\x00\x07\x00");
    let (_, v) = round_trip(3, vec![s("g")], 0, vec![Value::Int(7), Value::Int(9)]);
    assert_eq!(
        v,
        b"\x00\x00\x00\x00\x00\x07\x01\x00\x08\x00\x00\x00\x00\x00\x00\x00\x09"
    );
}

#[test]
fn a_null_classic_member_is_a_tag_and_the_empty_one_none() {
    let member = |classic: Value| {
        vec![
            Value::Str(None),
            Value::Str(None),
            s("c"),
            s("/h"),
            Value::Array(Some(vec![s("t")])),
            Value::Str(None),
            Value::Int(30000),
            s("uniform"),
            classic,
        ]
    };
    let key = vec![s("g"), s("m")];
    let (_, v) = round_trip(5, key.clone(), 0, member(Value::Struct(None)));
    assert!(v.ends_with(b"\x01\x00\x01\x00"));
    let empty = Value::Struct(Some(vec![Value::Int(0), Value::Array(Some(vec![]))]));
    let (_, v) = round_trip(5, key.clone(), 0, member(empty));
    assert!(v.ends_with(b"uniform\x00"));
    let classic = Value::Struct(Some(vec![
        Value::Int(45000),
        Value::Array(Some(vec![Value::Struct(Some(vec![
            s("range"),
            Value::Bytes(Some(vec![1, 2])),
        ]))])),
    ]));
    round_trip(5, key, 0, member(classic));
}

#[test]
fn assignment_epochs_travel_in_their_tag() {
    let topic = |epochs: Value| {
        Value::Struct(Some(vec![
            Value::Uuid([7; 16]),
            Value::Array(Some(vec![Value::Int(0), Value::Int(1)])),
            epochs,
        ]))
    };
    let value = |epochs: Value| {
        vec![
            Value::Int(5),
            Value::Int(4),
            Value::Int(0),
            Value::Array(Some(vec![topic(epochs)])),
            Value::Array(Some(vec![])),
        ]
    };
    let key = vec![s("g"), s("m")];
    let (_, without) = round_trip(8, key.clone(), 0, value(Value::Array(Some(vec![]))));
    let epochs = Value::Array(Some(vec![Value::Int(3), Value::Int(5)]));
    let (_, with) = round_trip(8, key, 0, value(epochs));
    assert_eq!(with.len(), without.len() + 2 + 1 + 8);
}

#[test]
fn bad_bytes_are_errors() {
    assert!(decode_key(b"\x00").is_err());
    assert!(decode_key(b"\x00\x01\x00\x05g").is_err());
    assert_eq!(decode_key(b"\x00\x63anything").unwrap(), (99, None));
    assert!(decode_value(
        &schema::CONSUMER_GROUP_METADATA,
        b"\x00\x01\x00\x00\x00\x01\x00"
    )
    .is_err());
    // A count past the data.
    assert!(decode_value(&schema::CONSUMER_REGEX, b"\x00\x00\xff\xff\xff\x0f").is_err());
    let long = "x".repeat(40_000);
    assert!(encode_key(
        1,
        &schema::OFFSET_COMMIT,
        &[s(&long), s("t"), Value::Int(0)]
    )
    .is_err());
}

#[test]
fn every_default_is_known_as_one() {
    fn check(fields: &[schema::Field]) {
        for f in fields {
            assert!(is_default(f, &default(f)), "{}", f.name);
            match f.ty {
                schema::Ty::Struct(inner) => check(inner),
                schema::Ty::Array(schema::Ty::Struct(inner)) => check(inner),
                _ => {}
            }
        }
    }
    for t in schema::RECORD_TYPES {
        check(t.key);
        check(t.value);
    }
    let hash = &schema::CONSUMER_GROUP_METADATA.value[1];
    assert!(!is_default(hash, &Value::Int(1)));
    let classic = &schema::CONSUMER_MEMBER_METADATA.value[8];
    assert!(!is_default(classic, &Value::Struct(None)));
}
