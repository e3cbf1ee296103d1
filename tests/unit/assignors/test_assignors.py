"""corral.assignors: the built-ins on Kafka's own test cases, the result type, the registry behind
group.consumer.assignors, and what happens to a user's assignor that fails or lies."""

from __future__ import annotations

import logging
import pickle
from collections.abc import Mapping

import pytest
from assignor_checks import check_assignment, topic_id
from checkout import ROOT

from corral.assignors import (
    AssignorConfigError,
    AssignorError,
    AssignorRegistry,
    GroupSpec,
    MemberAssignment,
    MemberSpec,
    RangeAssignor,
    SubscriptionType,
    TargetAssignment,
    UniformAssignor,
    load_assignor,
    run_assignor,
    subscription_type_of,
    validate_assignment,
)
from corral.config.settings import ConfigError, Settings

T1, T2, T3 = topic_id(1), topic_id(2), topic_id(3)
HOMOGENEOUS, HETEROGENEOUS = SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS


def spec(members: dict, kind=None) -> GroupSpec:
    """members: id -> (topics, previous assignment or None, instance id or None)."""
    built = {
        m: MemberSpec(frozenset(t), prev or {}, None, instance)
        for m, (t, prev, instance) in members.items()
    }
    return GroupSpec(built, kind) if kind else GroupSpec.of(built)


def plain(assignment: Mapping) -> dict:
    return {m: {t: tuple(p) for t, p in a.items()} for m, a in assignment.items()}


# Kafka's RangeAssignorTest (group-coordinator, 4.4): same inputs, same expected assignments.
RANGE_CASES = {
    "two members, two topics, same subscriptions": (
        {"A": ({T1, T3}, None, None), "B": ({T1, T3}, None, None)},
        {T1: 3, T3: 2},
        {"A": {T1: (0, 1), T3: (0,)}, "B": {T1: (2,), T3: (1,)}},
    ),
    "three members, three topics, different subscriptions": (
        {"A": ({T1, T2}, None, None), "B": ({T3}, None, None), "C": ({T2, T3}, None, None)},
        {T1: 3, T2: 3, T3: 2},
        {"A": {T1: (0, 1, 2), T2: (0, 1)}, "B": {T3: (0,)}, "C": {T2: (2,), T3: (1,)}},
    ),
    "more members than partitions": (
        {m: ({T1, T3}, None, None) for m in "ABC"},
        {T1: 3, T3: 2},
        {"A": {T1: (0,), T3: (0,)}, "B": {T1: (1,), T3: (1,)}, "C": {T1: (2,)}},
    ),
    "one member added after two members, two topics (range is stateless)": (
        {
            "A": ({T1, T2}, {T1: (0, 1), T2: (0, 1)}, None),
            "B": ({T1, T2}, {T1: (2,), T2: (2,)}, None),
            "C": ({T1, T2}, None, None),
        },
        {T1: 3, T2: 3},
        {"A": {T1: (0,), T2: (0,)}, "B": {T1: (1,), T2: (1,)}, "C": {T1: (2,), T2: (2,)}},
    ),
    "static members by instance id first, then dynamic by member id": (
        {
            "m-zz": ({T1}, None, "instance-a"),
            "m-aa": ({T1}, None, None),
            "m-bb": ({T1}, None, "instance-b"),
        },
        {T1: 5},
        {"m-zz": {T1: (0, 1)}, "m-bb": {T1: (2, 3)}, "m-aa": {T1: (4,)}},
    ),
    # Java compares strings by UTF-16 code unit: U+1F600 (a surrogate pair, 0xD83D...) sorts
    # before U+FF21 (0xFF21), where Python's code-point order puts it after.
    "member ids ordered as Java orders strings": (
        {"\uff21": ({T1}, None, None), "\U0001f600": ({T1}, None, None)},
        {T1: 2},
        {"\U0001f600": {T1: (0,)}, "\uff21": {T1: (1,)}},
    ),
}


@pytest.mark.parametrize("case", RANGE_CASES, ids=list(RANGE_CASES))
def test_range_gives_kafkas_assignment(case):
    members, counts, expected = RANGE_CASES[case]
    group = spec(members)
    result = RangeAssignor().assign(group, counts)
    assert plain(result) == expected
    assert isinstance(result, TargetAssignment) and list(result) == list(members)


def test_range_static_member_rejoining_with_a_new_member_id_keeps_its_partitions():
    # Kafka's testMixedStaticMembership
    first = RangeAssignor().assign(
        spec({"A": ({T1}, None, "iA"), "C": ({T1}, None, "iC"), "B": ({T1}, None, None)}), {T1: 5}
    )
    again = RangeAssignor().assign(
        spec({"C": ({T1}, None, "iC"), "B": ({T1}, None, None), "A1": ({T1}, None, "iA")}), {T1: 5}
    )
    assert again["A1"] == first["A"] and again["B"] == first["B"] and again["C"] == first["C"]


def test_uniform_small_group():
    group = spec({f"m{i}": ({T1, T2, T3}, None, None) for i in range(4)})
    counts = {T1: 5, T2: 3, T3: 1}
    result = UniformAssignor().assign(group, counts)
    check_assignment(group, counts, result)
    assert sorted(len(result[m][T1]) for m in result) == [1, 1, 1, 2]  # each topic spread
    assert sorted(len(result[m].get(T2, ())) for m in result) == [0, 1, 1, 1]
    assert sorted(sum(len(p) for p in result[m].values()) for m in result) == [2, 2, 2, 3]


@pytest.mark.parametrize("assignor", [UniformAssignor(), RangeAssignor()], ids=["uniform", "range"])
def test_edge_cases(assignor):
    assert dict(assignor.assign(GroupSpec({}, HOMOGENEOUS), {})) == {}
    # Members without subscriptions, a topic without partitions, an unsubscribed topic's partitions.
    group = spec(
        {"a": (set(), {T1: (0,)}, None), "b": ({T2}, {T1: (0,)}, None), "c": ({T2, T3}, None, None)}
    )
    result = assignor.assign(group, {T1: 4, T2: 0, T3: 2})
    assert plain(result)["a"] == {} and T1 not in result["b"]
    check_assignment(group, {T1: 4, T2: 0, T3: 2}, result)
    with pytest.raises(AssignorError, match="has no partition count"):
        assignor.assign(spec({"a": ({T1}, None, None)}), {T2: 3})
    # Subscriptions need not be sets (a list may even repeat a topic).
    listed = GroupSpec({"a": MemberSpec([T1, T1]), "b": MemberSpec([T1, T1])}, HOMOGENEOUS)
    assert plain(assignor.assign(listed, {T1: 2})) in (
        {"a": {T1: (0,)}, "b": {T1: (1,)}},
        {"a": {T1: (1,)}, "b": {T1: (0,)}},
    )


def test_uniform_reads_a_previous_target_assignment_like_the_same_dicts():
    group = spec({f"m{i}": ({T1, T2}, None, None) for i in range(5)})
    counts = {T1: 7, T2: 4}
    first = UniformAssignor().assign(group, counts)
    members = dict(group.members)
    del members["m0"]
    members["new"] = MemberSpec(frozenset({T1, T2}))
    from_target = GroupSpec(
        {m: MemberSpec(s.subscribed_topic_ids, first.get(m, {})) for m, s in members.items()},
        HOMOGENEOUS,
    )
    from_dicts = GroupSpec(
        {
            m: MemberSpec(s.subscribed_topic_ids, plain(first).get(m, {}))
            for m, s in members.items()
        },
        HOMOGENEOUS,
    )
    assert UniformAssignor().assign(from_target, counts) == UniformAssignor().assign(
        from_dicts, counts
    )


def test_results_are_read_only_mappings():
    group = spec({"a": ({T1, T2}, None, None), "b": ({T1}, None, None)})
    result = UniformAssignor().assign(group, {T1: 3, T2: 2})
    member = result["a"]
    assert isinstance(result, Mapping) and isinstance(member, Mapping)
    assert isinstance(member, MemberAssignment) and member.partition_count == 3
    assert member == dict(member) and dict(member) == member and member != {T1: (9,)}
    assert result == plain(result) and result != {"a": {}}
    assert "a" in result and "z" not in result and result.get("z") is None and len(result) == 2
    assert pickle.loads(pickle.dumps(result)) == plain(result)
    assert repr(member).startswith("MemberAssignment({")
    with pytest.raises(KeyError):
        result["z"]
    with pytest.raises(TypeError):
        hash(member)


def test_subscription_type():
    same = frozenset({T1})
    assert subscription_type_of([MemberSpec(same), MemberSpec({T1})]) is HOMOGENEOUS
    assert subscription_type_of([MemberSpec(same), MemberSpec({T1, T2})]) is HETEROGENEOUS
    assert subscription_type_of([]) is HOMOGENEOUS


# --- the registry and the setting -------------------------------------------------------------


def test_default_setting_is_kafkas():
    settings = Settings.load(environ={})
    assert settings["group.consumer.assignors"] == "uniform,range"
    registry = AssignorRegistry.from_setting(settings["group.consumer.assignors"])
    assert registry.names == ["uniform", "range"]
    assert isinstance(registry.default, UniformAssignor)
    assert registry.get(None) is registry.default and registry.get("") is registry.default
    assert isinstance(registry.get("range"), RangeAssignor)
    assert registry.get("sticky") is None  # Kafka: UNSUPPORTED_ASSIGNOR


def test_setting_with_custom_assignor_first():
    settings = Settings.load(
        overrides={"group.consumer.assignors": " assignor_plugins:RoundRobin , range"}, environ={}
    )
    assert settings["group.consumer.assignors"] == "assignor_plugins:RoundRobin,range"
    registry = AssignorRegistry.from_setting(settings["group.consumer.assignors"])
    assert registry.names == ["round-robin", "range"] and registry.default.name == "round-robin"


def test_kafkas_class_names_of_the_built_ins_work():
    registry = AssignorRegistry.from_setting(
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor,"
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor"
    )
    assert registry.names == ["range", "uniform"]


@pytest.mark.parametrize(
    "value, message",
    [
        ("", "comma-separated list"),
        ("uniform,,range", "comma-separated list"),
        ("uniform,uniform", "uniform listed twice"),
        ("sticky", "'sticky' is neither a built-in assignor"),
        ("no_such_module_here:X", "cannot import no_such_module_here"),
        ("assignor_plugins:Missing", "assignor_plugins has no Missing"),
        ("assignor_plugins:NamedUniform", "'uniform' is reserved by a built-in"),
        ("assignor_plugins:NoName", "not an assignor"),
        ("assignor_plugins:NeedsArguments", r"cannot create NeedsArguments\(\)"),
        ("assignor_plugins:RoundRobin,assignor_plugins:RoundRobin", "listed twice"),
    ],
)
def test_bad_settings_are_refused_at_load_time(value, message):
    with pytest.raises(ConfigError, match=f"group.consumer.assignors: .*{message}"):
        Settings.load(overrides={"group.consumer.assignors": value}, environ={})


def test_two_entries_with_one_name_are_refused():
    with pytest.raises(AssignorConfigError, match="two assignors are named 'round-robin'"):
        AssignorRegistry(
            [
                load_assignor("assignor_plugins:RoundRobin"),
                load_assignor("assignor_plugins:RoundRobin"),
            ]
        )


# --- running user assignors safely --------------------------------------------------------------

GROUP = spec({"a": ({T1}, None, None), "b": ({T1, T2}, None, None)})
COUNTS = {T1: 3, T2: 2}


def test_a_correct_user_assignor_result_is_normalized():
    result = run_assignor(load_assignor("assignor_plugins:RoundRobin"), "g1", GROUP, COUNTS)
    assert result == {"a": {T1: (0, 2)}, "b": {T1: (1,), T2: (0, 1)}}
    assert all(type(p) is tuple for a in result.values() for p in a.values())


def test_a_user_assignor_that_raises_fails_this_computation_only(caplog):
    caplog.set_level(logging.ERROR, "corral.assignors")
    assert (
        run_assignor(load_assignor("assignor_plugins:Raises"), "orders-group", GROUP, COUNTS)
        is None
    )
    [record] = caplog.records
    assert "group orders-group" in record.getMessage() and "'raises' failed" in record.getMessage()
    assert "this assignor is broken" in caplog.text  # the traceback is logged
    # The next computation (any assignor) goes on as usual.
    assert run_assignor(UniformAssignor(), "orders-group", GROUP, COUNTS) is not None


@pytest.mark.parametrize(
    "result, problem",
    [
        ({"a": {T1: [0]}, "b": {T1: [0]}}, "partition 0 is assigned twice"),
        ({"a": {T2: [0]}}, "member a is not subscribed to topic"),
        ({"b": {T2: [2]}}, "partition 2 is out of range"),
        ({"b": {T2: [-1]}}, "partition -1 is out of range"),
        ({"z": {T1: [0]}}, "member 'z' is not in the group"),
        ({"a": {T1: ["0"]}}, "partition '0' is not an int"),
        ({"a": {T1: 0}}, "partitions are not a collection"),
        ({"a": [T1]}, "expected a mapping of topic id to partitions"),
        ([("a", {})], "expected a mapping of member id"),
    ],
)
def test_invalid_user_assignments_are_rejected_and_logged(result, problem, caplog):
    caplog.set_level(logging.ERROR, "corral.assignors")
    assignor = load_assignor("assignor_plugins:Returns")
    assignor.result = result
    assert run_assignor(assignor, "g7", GROUP, COUNTS) is None
    [record] = caplog.records
    assert "group g7: assignor 'returns' returned an invalid assignment" in record.getMessage()
    assert problem in record.getMessage()
    with pytest.raises(ValueError, match=problem):
        validate_assignment(result, GROUP, COUNTS)


def test_unassigned_partitions_and_missing_members_are_allowed_as_in_kafka():
    assignor = load_assignor("assignor_plugins:Returns")
    assignor.result = {"b": {T2: {1}}}
    assert run_assignor(assignor, "g", GROUP, COUNTS) == {"a": {}, "b": {T2: (1,)}}


def test_built_in_results_are_not_revalidated_unless_asked():
    result = run_assignor(UniformAssignor(), "g", GROUP, COUNTS)
    assert isinstance(result, TargetAssignment)
    assert run_assignor(UniformAssignor(), "g", GROUP, COUNTS, validate=True) == result


def test_the_cython_modules_stub_matches_it():
    import ast
    import inspect

    from corral._core import _assign

    stub = ROOT / "src" / "corral" / "_core" / "_assign.pyi"
    tree = ast.parse(stub.read_text())
    declared = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    public = {name for name in vars(_assign) if not name.startswith("_")}
    assert public <= set(declared), public - set(declared)
    for name, node in declared.items():
        runtime = getattr(_assign, name)
        if isinstance(node, ast.FunctionDef):
            assert [a.arg for a in node.args.args] == list(inspect.signature(runtime).parameters), (
                name
            )
        else:
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    assert hasattr(runtime, member.name), f"{name}.{member.name}"
