"""The daemon's open-file limit. launchd starts services with a soft limit of 256 descriptors; the daemon holds the
Messages database, its own, the web page's connections and three pipes per agent run, so it raises its soft limit
at start (up to the hard limit) rather than let an agent fail to start with "Too many open files"."""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

WANTED = 4096  # far above what the daemon uses; under macOS's usual per-process cap (kern.maxfilesperproc)


def open_files_limit() -> int | None:
    """The soft limit now (None: unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def raise_open_files(wanted: int = WANTED) -> int | None:
    """Raises the soft limit to ``wanted`` (or the hard limit, if lower); never lowers it. Returns the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # a cap below the hard limit (macOS): keep what there is
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        else:
            log.info("raised the open-file limit from %d to %d", soft, target)
    return open_files_limit()
