"""The release wheels of ci/build_wheels.sh, installed outside this checkout: their tags and
binaries, the light install (extras), and `corral serve` answering ApiVersions over TCP on x86-64
natively and on aarch64 under qemu-user (docs/build.md, "Release wheels: x86-64 and aarch64")."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from checkout import ROOT
from conftest import CorralProcess
from packaging.requirements import Requirement
from packaging.tags import Tag, cpython_tags
from packaging.utils import parse_wheel_filename
from rawwire import RawClient

from corral.network.apis import ApiKey

# An aarch64 Debian 12 Python 3.11 (its .debs unpacked, no dpkg install) and qemu: ci/setup.sh.
ARM64_ROOT = Path.home() / ".cache" / "corral" / "arm64-python"
QEMU = "qemu-aarch64-static"
# ELF e_machine of each wheel's extension.
ELF_MACHINE = {"x86_64": 0x3E, "aarch64": 0xB7}
# Runs the `corral` console script the wheel declares, where no launcher script can be installed.
ENTRY_POINT = (
    "import sys; from importlib.metadata import entry_points; "
    "(main,) = entry_points(group='console_scripts', name='corral'); "
    "sys.argv[0] = 'corral'; sys.exit(main.load()())"
)


def pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True
    )


def outside_checkout() -> dict[str, str]:
    """The environment without this checkout's sources on PYTHONPATH."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def wheels() -> dict[str, Path]:
    """arch -> wheel; a no-op beyond hashing the sources when ci/setup.sh built them already."""
    built = subprocess.run(
        ["bash", str(ROOT / "ci" / "build_wheels.sh")], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    found = {
        arch: wheel
        for wheel in Path(built.stdout.strip()).glob("*.whl")
        for arch in ELF_MACHINE
        if wheel.name.endswith(f"_{arch}.whl")
    }
    assert set(found) == set(ELF_MACHINE), found
    return found


@pytest.mark.parametrize("arch", sorted(ELF_MACHINE))
def test_wheel_is_abi3_manylinux_for_its_machine(wheels, arch):
    _, _, _, tags = parse_wheel_filename(wheels[arch].name)
    assert Tag("cp311", "abi3", f"manylinux_2_17_{arch}") in tags
    # What pip on a glibc 2.28 system (RHEL 8, Debian 10) with CPython 3.11 or 3.13 accepts.
    for minor in (11, 13):
        accepted = set(
            cpython_tags(
                (3, minor),
                [f"cp3{minor}"],
                [f"manylinux_2_{glibc}_{arch}" for glibc in range(28, 16, -1)],
            )
        )
        assert tags & accepted
    with zipfile.ZipFile(wheels[arch]) as wheel:
        extensions = [n for n in wheel.namelist() if n.endswith(".so")]
        assert extensions == ["corral/_core.abi3.so"]
        elf = wheel.read(extensions[0])
    assert elf[:4] == b"\x7fELF"
    assert int.from_bytes(elf[18:20], "little") == ELF_MACHINE[arch]


def test_extras_keep_the_broker_install_light(wheels):
    with zipfile.ZipFile(wheels["x86_64"]) as wheel:
        metadata = Parser().parsestr(wheel.read("corral-0.1.0.dist-info/METADATA").decode())
    requires = [Requirement(r) for r in metadata.get_all("Requires-Dist")]

    def names(extra: str) -> set[str]:
        return {
            r.name + "".join(f"[{e}]" for e in r.extras)
            for r in requires
            if r.marker and r.marker.evaluate({"extra": extra})
        }

    base = {r.name for r in requires if r.marker is None}
    # prometheus-client: pure Python, no dependencies (the /metrics endpoint).
    assert base == {"trio", "rich", "google-re2", "prometheus-client"}
    assert names("load") == {"matplotlib"}
    assert names("cluster") == {"psycopg[binary]"}
    assert "corral[cluster]" in names("test")
    assert names("analyze") == {"pyspark", "pandas", "pyarrow", "numpy", "corral[load]"}
    assert "corral[load]" in names("test")


@pytest.fixture(scope="module")
def x86_64_venv(wheels, tmp_path_factory) -> Path:
    """A fresh venv with the x86-64 wheel and its dependencies only (no extras)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip("--python", str(venv / "bin" / "python"), "install", str(wheels["x86_64"]))
    return venv


def answers_api_versions(broker: CorralProcess, timeout: float = 10.0) -> list[int]:
    with RawClient(broker.port, timeout=timeout) as client:
        response = client.call(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "wheel-check", "client_software_version": "1"},
        )
    assert response["error_code"] == 0
    return sorted(k["api_key"] for k in response["api_keys"])


def serve_installed(command: list[str], data_dir: Path, corral, timeout: float) -> None:
    """The installed `corral serve` answers ApiVersions with the same APIs as this checkout's."""
    broker = CorralProcess(data_dir, command=command)
    try:
        broker.start(timeout=timeout)
        assert answers_api_versions(broker, timeout) == answers_api_versions(corral)
        assert broker.stop(timeout=timeout) == 0
    finally:
        if broker.alive():
            broker.kill()


def test_x86_64_wheel_serves_from_a_fresh_venv(x86_64_venv, tmp_path, corral):
    corral_script = str(x86_64_venv / "bin" / "corral")
    check = subprocess.run(
        [str(x86_64_venv / "bin" / "python"), "-c", "import corral; print(corral.__file__)"],
        env=outside_checkout(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.startswith(str(x86_64_venv))
    serve_installed(
        ["env", "-u", "PYTHONPATH", corral_script], tmp_path / "wheel", corral, timeout=20
    )


def test_load_plot_without_matplotlib_names_the_extra(x86_64_venv, tmp_path):
    run = subprocess.run(
        [
            str(x86_64_venv / "bin" / "corral"),
            "load",
            "--bootstrap",
            "127.0.0.1:9",
            "--scenario",
            "join-storm",
            "--plot",
            str(tmp_path / "p.png"),
        ],
        env=outside_checkout(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "pip install 'corral[load]'" in run.stderr
    assert "Traceback" not in run.stderr


def test_aarch64_wheel_serves_under_qemu(wheels, tmp_path, corral):
    site = tmp_path / "site"
    # pip resolves the aarch64 wheels of the dependencies from here; nothing runs under qemu yet.
    # Every manylinux tag Debian 12's glibc 2.36 takes (pip does not expand one given tag), and
    # the legacy alias of manylinux_2_17 that older wheels carry alone.
    platforms = [
        arg
        for tag in [*(f"manylinux_2_{glibc}" for glibc in range(36, 16, -1)), "manylinux2014"]
        for arg in ("--platform", f"{tag}_aarch64")
    ]
    pip(
        "install",
        "--target",
        str(site),
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        "3.11",
        *platforms,
        str(wheels["aarch64"]),
    )
    python = ARM64_ROOT / "usr" / "bin" / "python3.11"
    assert python.exists(), "ci/setup.sh unpacks the aarch64 Python"
    # -L: the guest's dynamic loader and libraries come from ARM64_ROOT.
    command = [
        "env",
        f"PYTHONPATH={site}",
        QEMU,
        "-L",
        str(ARM64_ROOT),
        str(python),
        "-s",
        "-c",
        ENTRY_POINT,
    ]
    # The Cython assignors are linked into the cross-compiled _core too.
    machine = subprocess.run(
        [*command[:-2], "-c", "import platform, corral._core._assign; print(platform.machine())"],
        capture_output=True,
        text=True,
    )
    assert (machine.returncode, machine.stdout.strip()) == (0, "aarch64"), machine.stderr
    # Emulated, the imports alone take seconds on a busy machine.
    serve_installed(command, tmp_path / "wheel", corral, timeout=120)
