"""Which processes of the python sandbox's user (uid nobody) a test left behind, when other tests may be running
sandbox calls of their own on the same machine (the parallel test run)."""

from __future__ import annotations

import psutil

NOBODY = 65534


def sandbox_processes(owners: set[int], since: float, uid: int = NOBODY) -> set[int]:
    """The sandbox user's processes that belong to ``owners`` (a pid among their ancestors: the process that ran the
    sandbox) or that are orphans (re-parented to init, their runner gone) started at ``since`` or later; another
    test's calls, under their own runner, are not listed."""
    found = set()
    for proc in psutil.process_iter(["uids", "ppid", "create_time"]):
        if not proc.info["uids"] or proc.info["uids"].real != uid:
            continue
        try:
            ancestors = {p.pid for p in proc.parents()}
        except psutil.NoSuchProcess:
            continue
        orphan = proc.info["ppid"] == 1 and proc.info["create_time"] >= since
        if ancestors & owners or orphan:
            found.add(proc.pid)
    return found
