use super::partition_for;

#[test]
fn groups_are_placed_as_kafka_places_them() {
    // Values from Python's placement.partition_for (Java's String.hashCode).
    assert_eq!(partition_for("", 50), 0);
    assert_eq!(partition_for("my-group", 50), partition_for("my-group", 50));
    let hash = "abc"
        .encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32));
    assert_eq!(hash, 96354);
    assert_eq!(partition_for("abc", 50), 96354 % 50);
    assert_eq!(
        partition_for("日本", 7),
        ("日本"
            .encode_utf16()
            .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
            .abs())
            % 7
    );
}
