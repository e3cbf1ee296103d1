"""`src/corral/_core/__init__.pyi` against the compiled module: the stub declares what exists, of the kind
it says, with the parameters the Rust takes, and covers every `_core.<name>` the Python uses."""

import ast
import builtins
import inspect

import pytest
from checkout import ROOT

from corral import _core

STUB = ROOT / "src" / "corral" / "_core" / "__init__.pyi"
TREE = ast.parse(STUB.read_text(), filename=str(STUB))

CLASSES = {n.name: n for n in TREE.body if isinstance(n, ast.ClassDef)}
FUNCTIONS = {n.name: n for n in TREE.body if isinstance(n, ast.FunctionDef)}
ALIASES = {
    n.target.id
    for n in TREE.body
    if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
}


def _is_property(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)


def _members(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AnnAssign]:
    out: dict[str, ast.FunctionDef | ast.AnnAssign] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def _stub_params(fn: ast.FunctionDef, method: bool) -> list[tuple[str, str, bool]]:
    """(name, kind, has default) of each parameter, `self` (or `cls`) left out."""
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [False] * (len(positional) - len(a.defaults)) + [True] * len(a.defaults)
    params = [(p.arg, "positional", d) for p, d in zip(positional, defaults)]
    if method:
        params = params[1:]
    params += [(p.arg, "keyword", d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return params


def _runtime_params(obj, method: bool) -> list[tuple[str, str, bool]]:
    params = list(inspect.signature(obj).parameters.values())
    if method:
        params = params[1:]
    kinds = {inspect.Parameter.KEYWORD_ONLY: "keyword"}
    return [
        (p.name, kinds.get(p.kind, "positional"), p.default is not inspect.Parameter.empty)
        for p in params
    ]


def _stub_all() -> list[str]:
    for node in TREE.body:
        if isinstance(node, ast.Assign) and [
            t.id for t in node.targets if isinstance(t, ast.Name)
        ] == ["__all__"]:
            return ast.literal_eval(node.value)
    raise AssertionError("the stub has no __all__")


def test_the_stub_declares_every_runtime_export():
    assert set(_core.__all__) == set(CLASSES) | set(FUNCTIONS)
    assert sorted(_stub_all()) == sorted(_core.__all__)


def test_aliases_are_stub_only():
    # Type aliases are for type checkers: none may shadow (or pretend to be) a runtime name.
    assert ALIASES
    assert not ALIASES & set(dir(_core))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_stub_class_is_a_runtime_class(name):
    runtime = getattr(_core, name)
    assert isinstance(runtime, type)
    for base in CLASSES[name].bases:
        if isinstance(base, ast.Subscript) and ast.unparse(base.value) == "Generic":
            continue  # generic for type checkers only (Request[JoinGroupRequest])
        assert isinstance(base, ast.Name)
        assert issubclass(runtime, getattr(builtins, base.id)), base.id


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_stub_function_is_a_runtime_function(name):
    runtime = getattr(_core, name)
    assert callable(runtime) and not isinstance(runtime, type)
    assert _stub_params(FUNCTIONS[name], method=False) == _runtime_params(runtime, method=False)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_stub_members_exist_on_the_runtime_class(name):
    runtime = getattr(_core, name)
    for member, node in _members(CLASSES[name]).items():
        assert hasattr(runtime, member), f"{name}.{member}"
        if member == "__new__":
            # pyo3's #[new] is the class's signature (there is no Python-level __init__).
            assert _stub_params(node, method=True) == _runtime_params(runtime, method=False), name
            continue
        attribute = inspect.getattr_static(runtime, member)
        if isinstance(node, ast.AnnAssign) or _is_property(node):
            assert inspect.isdatadescriptor(attribute), f"{name}.{member} is not a property"
        else:
            assert callable(attribute), f"{name}.{member} is not a method"
            if not member.startswith("__"):
                assert _stub_params(node, method=True) == _runtime_params(attribute, method=True), (
                    f"{name}.{member}"
                )


def test_runtime_classes_have_no_undeclared_public_members():
    for name, cls in CLASSES.items():
        runtime = getattr(_core, name)
        if issubclass(runtime, BaseException):
            continue
        public = {m for m in vars(runtime) if not m.startswith("_")}
        assert public <= set(_members(cls)), f"{name}: {sorted(public - set(_members(cls)))}"


def _core_references():
    for path in sorted((ROOT / "src" / "corral").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "_core"
            ):
                yield path.relative_to(ROOT), node.lineno, node.attr


def test_every_core_name_the_package_uses_is_in_the_stub():
    refs = list(_core_references())
    assert refs, "no _core.<name> found: did the scan break?"
    missing = [
        f"{path}:{line}: _core.{attr}"
        for path, line, attr in refs
        if attr not in CLASSES and attr not in FUNCTIONS
    ]
    assert not missing, missing


RESULTS = ["AppendResult", "ReadResult", "FetchResult", "RetentionResult", "BatchSummary"]


@pytest.mark.parametrize("name", RESULTS)
def test_results_are_frozen_and_made_only_by_the_core(name):
    runtime = getattr(_core, name)
    with pytest.raises(TypeError):
        runtime()
    # Read-only fields only: results carry no methods.
    members = _members(CLASSES[name]).values()
    assert members and all(isinstance(n, ast.FunctionDef) and _is_property(n) for n in members)


def test_log_store_answers_with_named_results(tmp_path):
    summary = _core.validate_batches(
        _core.build_batch([(b"k", b"v" * 50), (None, b"w")], 1000), 1 << 20
    )
    assert (
        summary.batch_count,
        summary.producer_id,
        summary.producer_epoch,
        summary.base_sequence,
        summary.offset_count,
    ) == (1, -1, -1, -1, 2)

    store = _core.LogStore(str(tmp_path))
    store.open_partition("t", 0, 100, 1, -1)  # 100-byte segments: a roll per batch
    for i in range(3):
        appended = store.append(
            "t", 0, _core.build_batch([(b"k", b"v" * 50), (None, b"w")], 1000), 5000 + i
        )
        assert (
            appended.error_code,
            appended.base_offset,
            appended.last_offset,
            appended.log_append_time,
            appended.unflushed,
        ) == (0, 2 * i, 2 * i + 1, 5000 + i, 2 * i + 2)
    with pytest.raises(AttributeError):
        appended.base_offset = 7  # frozen

    read = store.read("t", 0, 0, 1 << 20, True)
    assert read.data and (read.high_watermark, read.log_start_offset) == (6, 0)
    assert [o for o, *_ in _core.decode_batches(read.data)] == [0, 1]

    fetched = store.fetch_response(7, 12, [("t", [(0, 0, 0, 1 << 20)])], 1 << 20)
    assert fetched.frame[4:8] == (7).to_bytes(4, "big")
    assert fetched.record_bytes == len(read.data) and fetched.any_error is False
    missing = store.fetch_response(8, 12, [("nope", [(0, 0, 0, 1 << 20)])], 1 << 20)
    assert missing.record_bytes == 0 and missing.any_error is True

    [deleted] = store.apply_retention(10**13)  # retention.ms 1: every segment is old
    assert (deleted.topic, deleted.partition, deleted.log_start_offset) == ("t", 0, 6)
    assert deleted.segments_deleted >= 2
    after = store.read("t", 0, 0, 1 << 20, True)
    assert after.data is None and (after.high_watermark, after.log_start_offset) == (6, 6)
    assert "log_start_offset=6" in repr(deleted) and "'t'" in repr(deleted)
