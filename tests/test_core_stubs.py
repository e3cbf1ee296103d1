"""`src/corral/_core/__init__.pyi` against the compiled module: the stub declares what exists, of the kind
it says, with the parameters the Rust takes, and covers every `_core.<name>` the Python uses."""

import ast
import builtins
import inspect
from pathlib import Path

import pytest

from corral import _core

ROOT = Path(__file__).resolve().parent.parent
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
    return [(p.name, kinds.get(p.kind, "positional"), p.default is not inspect.Parameter.empty) for p in params]


def _stub_all() -> list[str]:
    for node in TREE.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"]:
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
                assert _stub_params(node, method=True) == _runtime_params(attribute, method=True), f"{name}.{member}"


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
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "_core":
                yield path.relative_to(ROOT), node.lineno, node.attr


def test_every_core_name_the_package_uses_is_in_the_stub():
    refs = list(_core_references())
    assert refs, "no _core.<name> found: did the scan break?"
    missing = [f"{path}:{line}: _core.{attr}" for path, line, attr in refs if attr not in CLASSES and attr not in FUNCTIONS]
    assert not missing, missing
