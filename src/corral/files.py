"""Small durable-file helpers shared by the modules that keep state in the data dir."""

from __future__ import annotations

import os
from pathlib import Path


def replace_durably(path: Path, content: str | bytes) -> None:
    """Replaces `path` with `content` atomically and durably: write a temporary file, fsync it,
    rename it over `path`, fsync the directory (so the rename itself survives a power loss). On an
    error `path` is unchanged and the temporary file removed."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Disk full, say: the old file stays, and a partial temporary one must not hold space.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsyncs a directory, so that the entries created or renamed in it survive a power loss."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
