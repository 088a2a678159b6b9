"""Servers this process starts end when it dies, even by SIGKILL.

`end_with_parent` gives a started process group a watchdog: a small Python process holding the read end of
a pipe whose write end only this process holds. When this process exits, however it exits, the kernel closes
the write end; the watchdog reads end-of-file and ends the group (SIGTERM, then SIGKILL after a grace
period); a child this process forks without exec holds the pipe too, so the group ends once both are gone.
Linux's parent-death signal (``PR_SET_PDEATHSIG``) is not enough here: it fires when the *thread*
that started the child exits, and reaches only that child, not the engine processes a server spawns.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

__all__ = ["ProcessGroupWatchdog", "end_with_parent"]

_WATCHDOG = """
import os, signal, sys, time
group, grace = int(sys.argv[1]), float(sys.argv[2])
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal is for the parent, not for us
sys.stdin.buffer.read()  # returns at end-of-file: the parent has exited, or closed the watchdog
def alive():
    # a member still running; zombies do not count (the parent reaps its child only once we have returned)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                state, _, pgrp = stat.read().rpartition(")")[2].split()[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == group and state != "Z":
            return True
    return False
if alive():
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive():
        os.killpg(group, signal.SIGKILL)
"""


class ProcessGroupWatchdog:
    """The watchdog of one process group; `close` ends the group (if it still runs) and the watchdog."""

    def __init__(self, process_group: int, *, grace_s: float) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(process_group), str(grace_s)],
            stdin=subprocess.PIPE,  # its write end is close-on-exec: no other child inherits it
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in the watched group, and not sent the terminal's signals
        )

    @property
    def pid(self) -> int:
        """The watchdog's process id."""
        return self._process.pid

    def close(self) -> None:
        """End the group now if it still runs (as at this process's death), and wait for the watchdog."""
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        self._process.wait()


def end_with_parent(process: subprocess.Popen, *, grace_s: float = 10.0) -> ProcessGroupWatchdog:
    """Tie ``process`` (started with ``start_new_session=True``: the leader of its own process group) and
    everything it spawns to this process: when this process dies, the group gets SIGTERM, then SIGKILL
    after ``grace_s``."""
    return ProcessGroupWatchdog(process.pid, grace_s=grace_s)
