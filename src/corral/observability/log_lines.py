"""How log lines look (`corral serve --log-format text|json`), and the structured fields the
group coordinator attaches to its lines (`extra=fields(...)`).

text: `ts level logger message`, control characters in the message escaped, so that an id sent
by a client cannot forge log lines (tracebacks, which are corral's own, stay multi-line).
json: one object per line: ts (UTC, ISO 8601), level, logger, message, and group_id, member_id
and epoch when the line is about a group (epoch: a classic group's generation or a consumer
group member's epoch); an exception's traceback goes in `exc`. JSON escapes every control
character, so a line is always one line.
"""

from __future__ import annotations

import json
import logging
import time

# Control characters (and Unicode line breaks) a client could put in a group, member or client id.
_UNPRINTABLE = {c: f"\\x{c:02x}" for c in range(32)} | {
    0x7F: "\\x7f",
    0x85: "\\x85",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
FIELDS = ("group_id", "member_id", "epoch")


def fields(group_id: str, member_id: str | None = None, epoch: int | None = None) -> dict:
    """The `extra=` of a log call about a group, its member and epoch."""
    return {"group_id": group_id, "member_id": member_id, "epoch": epoch}


class OneLineFormatter(logging.Formatter):
    """The text format."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        if not record.message.isprintable():
            record.message = record.message.translate(_UNPRINTABLE)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """The json format: one object per line."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = {
            "ts": f"{ts}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


def formatter(kind: str) -> logging.Formatter:
    if kind == "json":
        return JsonFormatter()
    return OneLineFormatter("%(asctime)s %(levelname)s %(name)s %(message)s")
