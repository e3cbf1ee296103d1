"""The HTML report (corral.analyze.report) of a hand-built history and of an empty one: one
self-contained file that parses, has every section, embeds PNGs that decode, and refers to
nothing outside itself."""

from __future__ import annotations

import base64
import io
from html.parser import HTMLParser

import numpy as np
from analyzekit import make_inputs
from matplotlib import image

from corral.analyze import inputs as inp
from corral.analyze.job import analyze
from corral.analyze.report import write_report
from corral.analyze.tables import derive

SECTIONS = [
    "lag-heatmap",
    "p99-lag",
    "status-ribbon",
    "rebalance-durations",
    "member-churn",
    "worst-groups",
    "longest-rebalances",
    "skewed-assignments",
    "commit-activity",
]
PLOTS = SECTIONS[:5]


class Page(HTMLParser):
    """Sections (id -> the text and images inside), every src/href, the tags seen."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.current: str | None = None
        self.refs: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        if tag == "section":
            self.current = attrs["id"]
            self.sections[self.current] = {"text": "", "images": [], "tables": 0}
        self.refs += [v for k, v in attrs.items() if k in ("src", "href")]
        if self.current and tag == "img":
            self.sections[self.current]["images"].append(attrs["src"])
        if self.current and tag == "table":
            self.sections[self.current]["tables"] += 1

    def handle_endtag(self, tag):
        if tag == "section":
            self.current = None

    def handle_data(self, data):
        if self.current:
            self.sections[self.current]["text"] += data


def parse(path) -> tuple[str, Page]:
    text = path.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    page.close()
    return text, page


def decode_png(src: str) -> np.ndarray:
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix)
    return image.imread(io.BytesIO(base64.b64decode(src[len(prefix) :])), format="png")


def self_contained(text: str, page: Page) -> None:
    assert "http://" not in text and "https://" not in text
    assert not page.tags & {"script", "link", "iframe", "object", "embed"}
    assert all(ref.startswith("data:image/png;base64,") for ref in page.refs)


SAMPLES = [
    ("t", p, t, off)
    for p in (0, 1)
    for t, off in [(1000, 10), (2000, 20), (30000, 30), (61000, 40), (62000, 45), (130000, 60)]
]


def test_report_of_a_history(spark, tmp_path):
    history = make_inputs(spark)
    samples = spark.createDataFrame(
        [(*s, None, seq) for seq, s in enumerate(SAMPLES)], inp.SAMPLES_SCHEMA
    )
    done = analyze(history.commits, samples, str(tmp_path / "out"))
    tables = {
        **done.tables._asdict(),
        **done.work,
        **derive(history.events, done.tables.partition_lag, done.work["_commit_counts"]),
    }
    # As `corral analyze` would pass them once written: each computed once, not per plot.
    tables = {name: df.cache() for name, df in tables.items()}
    path = tmp_path / "report.html"
    write_report(tables, str(path), "corral analyze <test>")
    text, page = parse(path)
    self_contained(text, page)
    assert "<title>corral analyze &lt;test&gt;</title>" in text
    assert list(page.sections) == SECTIONS
    for sid in PLOTS:
        [src] = page.sections[sid]["images"]
        pixels = decode_png(src)
        assert pixels.shape[0] > 150 and pixels.shape[1] > 400, (sid, pixels.shape)
        assert np.ptp(pixels[..., :3]) > 0.5, sid  # something is drawn
    for sid in SECTIONS[5:]:
        assert page.sections[sid]["tables"] == 1 and "no data" not in page.sections[sid]["text"], (
            sid
        )
    # The longest rebalance first; the skewed classic generation (m2 idle) first of its table.
    longest = page.sections["longest-rebalances"]["text"]
    assert longest.index("adding member m2") < longest.index("adding member m1")
    assert page.sections["skewed-assignments"]["text"].startswith(
        "Most skewed assignmentsgroupprotocoltime (UTC)generationmembersidle membersmost partitionsskew (max/mean)"
        "lag over its lifetime (records)gcclassic1970-01-01 00:01:012212"
    )
    assert "ILLEGAL" not in text  # per-error detail stays in the table, the report sums
    assert "3 ended rebalances" in page.sections["rebalance-durations"]["text"]
    for df in tables.values():
        df.unpersist()


def test_report_of_an_empty_history(spark, tmp_path):
    empty = inp.empty(spark)
    done = analyze(empty.commits, empty.samples, str(tmp_path / "out"))
    tables = {
        **done.tables._asdict(),
        **done.work,
        **derive(empty.events, done.tables.partition_lag, done.work["_commit_counts"]),
    }
    path = tmp_path / "empty.html"
    write_report(tables, str(path), "empty")
    text, page = parse(path)
    self_contained(text, page)
    assert list(page.sections) == SECTIONS
    for sid, section in page.sections.items():
        assert section["text"].endswith("no data") and not section["images"], sid
    assert "History: no data." in text
    # Tables that are not there at all: the same.
    write_report({}, str(path), "nothing")
    assert parse(path)[1].sections.keys() == page.sections.keys()
