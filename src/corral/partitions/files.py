"""Small durable-file helpers shared by the modules that keep state in the data dir."""

from __future__ import annotations

import os
from pathlib import Path


def replace_durably(path: Path, content: str | bytes, mode: int = 0o666) -> None:
    """Replaces `path` with `content` atomically and durably: write a temporary file, fsync it,
    rename it over `path`, fsync the directory (so the rename itself survives a power loss). On an
    error `path` is unchanged and the temporary file removed. `mode`: the new file's permissions
    (less the umask), 0o600 for secrets."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        # A new file, so that `mode` applies (a crash may have left the temporary one behind).
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        with open(fd, "wb" if isinstance(content, bytes) else "w") as f:
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
