"""The README's promises, checked so that they cannot rot."""

from __future__ import annotations

import re
import struct
import subprocess
import sys

from aclkit import EVERYTHING, creation
from checkout import ROOT
from rawwire import RawClient
from wire_data import _legacy_produce, batch, create, delete_records, fetch, produce

from corral.errors import ErrorCode
from corral.network.apis import ApiKey

README = ROOT / "README.md"


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)


def test_client_example_runs_against_corral(corral):
    [example] = [b for b in code_blocks("python") if "AdminClient" in b]
    assert "127.0.0.1:9092" in example
    script = example.replace("127.0.0.1:9092", corral.bootstrap)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "orders" in result.stdout
    assert "created topic orders (8 partitions" in corral.log()


def test_the_two_commands_at_the_top_exist():
    [commands] = code_blocks("sh")[:1]
    lines = [line for line in commands.splitlines() if line and not line.startswith("#")]
    assert lines == ["pip install . && corral serve", "bash ci/test.sh"]
    assert (README.parent / "ci/test.sh").exists()
    assert 'corral = "corral.cli:main"' in (README.parent / "pyproject.toml").read_text()


# ------------------------------------------------------------------ the API table of "What works today"

# Advertised APIs the table leaves out on purpose (none today): {ApiKey name: why}.
UNLISTED: dict[str, str] = {}


def api_table() -> list[tuple[str, dict[str, tuple[int, int]], str]]:
    """The rows of the `| API | versions |` table: (first cell, {ApiKey name: (min, max)}, notes).
    A row names APIs separated by ` / ` and gives their versions in the same order; `advertised
    from N` in its notes moves the advertised minimum (Produce answers v0-2 but serves v3+)."""
    lines = README.read_text().splitlines()
    start = lines.index("| API | versions |")
    assert lines[start + 1] == "| --- | --- |"
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        apis, versions = (cell.strip() for cell in line.strip().strip("|").split("|", 1))
        ranges, notes = re.fullmatch(
            r"(\d+(?:-\d+)?(?: / \d+(?:-\d+)?)*)(.*)", versions.strip()
        ).groups()
        names = apis.split(" / ")
        spans = [
            tuple(map(int, r.split("-"))) if "-" in r else (int(r), int(r))
            for r in ranges.split(" / ")
        ]
        assert len(names) == len(spans), line
        advertised_from = re.search(r"advertised from (\d+)", notes)
        table = {}
        for name, (low, high) in zip(names, spans):
            if advertised_from:
                low = int(advertised_from.group(1))
            table[re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()] = (low, high)
        rows.append((apis, table, notes))
    return rows


def advertised(port: int) -> dict[str, tuple[int, int]]:
    with RawClient(port) as raw:
        answer = raw.call(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "readme", "client_software_version": "1"},
        )
    assert answer["error_code"] == 0
    names = {int(key): key.name for key in ApiKey}
    return {
        names.get(k["api_key"], str(k["api_key"])): (k["min_version"], k["max_version"])
        for k in answer["api_keys"]
    }


def test_the_api_table_is_what_corral_advertises(shared_corral):
    """Every row's APIs and versions are what ApiVersions advertises, and every advertised API
    has its row (UNLISTED names the ones left out on purpose)."""
    table = {name: span for _, apis, _ in api_table() for name, span in apis.items()}
    ours = advertised(shared_corral.port)
    assert len(table) > 30
    wrong = {name: (span, ours.get(name)) for name, span in table.items() if ours.get(name) != span}
    assert not wrong, "table row != advertised"
    missing = sorted(set(ours) - set(table) - set(UNLISTED))
    assert not missing, "advertised, not in the table"
    assert not set(UNLISTED) & set(table)


def _produce_v2(broker) -> set[int]:
    with RawClient(broker.port) as raw:
        raw.sock.sendall(_legacy_produce(2, acks=1, correlation_id=1))
        frame = raw.receive_frame()
    # correlation id, 1 topic, "old", 2 partitions, then the first partition's index and error.
    return {struct.unpack_from(">h", frame, 4 + 4 + 2 + 3 + 4 + 4)[0]}


def _fetch_below_deleted_records(broker) -> set[int]:
    with RawClient(broker.port) as raw:
        create(raw, "readme-deleted")
        assert produce(raw, "readme-deleted", 0, batch(3))["error_code"] == 0
        assert delete_records(raw, [("readme-deleted", [(0, 2)])])[0][2] == 0
        return {fetch(raw, "readme-deleted", 0, 0)["responses"][0]["partitions"][0]["error_code"]}


def _acls_without_authorizer(broker) -> set[int]:
    with RawClient(broker.port) as raw:
        return {
            raw.call(ApiKey.DESCRIBE_ACLS, 3, EVERYTHING)["error_code"],
            raw.call(ApiKey.CREATE_ACLS, 3, {"creations": [creation("t")]})["results"][0][
                "error_code"
            ],
            raw.call(ApiKey.DELETE_ACLS, 3, {"filters": [EVERYTHING]})["filter_results"][0][
                "error_code"
            ],
        }


# The answers the table's rows name, each asked of a real corral: (row, error code) -> the codes
# corral answers where the row says it answers that one.
ANSWERS = {
    ("Produce", "UNSUPPORTED_VERSION"): _produce_v2,
    ("DeleteRecords", "OFFSET_OUT_OF_RANGE"): _fetch_below_deleted_records,
    ("DescribeAcls / CreateAcls / DeleteAcls", "SECURITY_DISABLED"): _acls_without_authorizer,
}


def test_the_error_codes_the_api_table_names_are_what_corral_answers(shared_corral):
    """Each error code a row names is checked by asking corral (ANSWERS); a row naming a code
    without a check here fails, so a new claim comes with its check."""
    claims = {
        (apis, word)
        for apis, _, notes in api_table()
        for word in re.findall(r"\b[A-Z][A-Z0-9_]+\b", notes)
        if word in ErrorCode.__members__
    }
    assert not claims - set(ANSWERS), "the table names answers no test checks"
    assert not set(ANSWERS) - claims, "checks of answers the table no longer names"
    answered = {claim: ANSWERS[claim](shared_corral) for claim in sorted(claims)}
    wrong = {
        claim: sorted(ErrorCode(c).name for c in codes)
        for claim, codes in answered.items()
        if codes != {ErrorCode[claim[1]]}
    }
    assert not wrong
