"""The file-descriptor budget: how the open-files limit (RLIMIT_NOFILE) is shared between the
log store's segment files and client connections, so that neither starves the other.

At start the soft limit is raised to the hard one. Segment files get a quarter of it, at most
65,536 (the log store's cache, `corral.log.open.files.max`); connections get what is left after
the descriptors open at start and a reserve of at least that quarter (at least 64, or half of a
tiny limit), so accept() keeps a descriptor for the listener's refusals too.
"""

from __future__ import annotations

import logging
import os
import resource

log = logging.getLogger("corral.descriptors")

UNLIMITED = 2**31 - 1
MIN_SEGMENT_FILES = 16
# The cache's table is allocated at its full size: an unlimited (or 1M) limit must not cost that.
MAX_SEGMENT_FILES = 65_536


def soft_limit() -> int:
    """The soft RLIMIT_NOFILE; UNLIMITED when it has none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UNLIMITED if soft == resource.RLIM_INFINITY else min(soft, UNLIMITED)


def raise_limit() -> None:
    """Raises the soft RLIMIT_NOFILE to the hard limit (every client socket and cached segment
    file is a descriptor) and logs both."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:
        # Linux refuses an infinite RLIMIT_NOFILE; fs.nr_open is the most it allows.
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read())
        except (OSError, ValueError):
            target = soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as e:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, e)
    log.info(
        "open-files limit (RLIMIT_NOFILE): soft %s (was %s), hard %s",
        _shown(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
        _shown(soft),
        _shown(hard),
    )


def segment_files(limit: int) -> int:
    """The log store's share: a quarter of the limit, within
    MIN_SEGMENT_FILES..MAX_SEGMENT_FILES."""
    if limit == resource.RLIM_INFINITY:
        limit = UNLIMITED
    return min(MAX_SEGMENT_FILES, max(MIN_SEGMENT_FILES, limit // 4))


def connections(limit: int, open_now: int) -> int:
    """Connections the limit allows: it minus the descriptors open now (the listener, Python's
    own) minus a reserve for what opens later (segment files, snapshots, the network thread's
    spare)."""
    if limit == resource.RLIM_INFINITY or limit >= UNLIMITED:
        return UNLIMITED
    reserve = max(min(64, limit // 2), limit // 4)
    return max(0, limit - open_now - reserve)


def open_now() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def _shown(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)
