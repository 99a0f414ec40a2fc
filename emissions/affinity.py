"""CPU_AFFINITY: each serving process on one CPU of its own.

CPython runs one thread of a process at a time. A served request passes between Waitress's
polling thread and a request thread several times, and when the kernel keeps those threads on
different CPUs, every pass is a wake-up of another CPU; on a virtual machine that costs more than
the request's own work. On the 2-CPU machine of docs/performance.md one unpinned process served
about 1,400 GETs a second and the same process on one CPU about 4,200 (PostgreSQL: 2,400 against
6,200); a fresh POST gained 10 to 20 %. So `serve` puts each worker's threads on one CPU: worker
i on the i-th CPU of the list, round and round.
"""
from __future__ import annotations

import os

AUTO, OFF = "auto", "off"


def parse(text: str) -> str | tuple[int, ...]:
    """'auto', 'off', or a CPU list such as '0-3,6' as a tuple of CPU numbers; ValueError if none."""
    lowered = text.strip().lower()
    if lowered in (AUTO, OFF):
        return lowered
    cpus: dict[int, None] = {}  # in the order given, each once
    for part in lowered.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):  # "3-" is no range
            raise ValueError(f"{part.strip()!r} is not a CPU number or range")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"{part.strip()!r} is a range that runs backwards")
        cpus.update(dict.fromkeys(range(low, high + 1)))
    return tuple(cpus)


def choose(setting: str | tuple[int, ...], worker_index: int) -> int | None:
    """The CPU worker `worker_index` runs on, or None to leave it to the kernel.

    'auto' takes the CPUs this process may use (a container's or `taskset`'s restriction holds) and
    leaves a process that may use only one as it is; a list is taken as given.
    """
    if setting == OFF or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0)) if setting == AUTO else list(setting)
    if setting == AUTO and len(cpus) < 2:
        return None
    return cpus[worker_index % len(cpus)]


_unpinned: set[int] | None = None  # the CPUs this process could use before pin(), once pinned


def pin(cpu: int) -> None:
    """Put every thread of this process on `cpu` (threads started later inherit it).

    sched_setaffinity(0) moves only the calling thread, so each thread of /proc/self/task is moved.
    """
    global _unpinned
    if _unpinned is None:
        _unpinned = os.sched_getaffinity(0)
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), {cpu})
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def release_this_thread() -> None:
    """Let the calling thread run on any CPU the process could use before pin().

    For threads whose work runs with the interpreter lock released (SQLite's WAL checkpoint, scrypt
    for a sign-in): on the serving CPU they would take tens of milliseconds from the requests, and
    elsewhere they hand the lock over rarely. Nothing to do in a process that was not pinned.
    """
    if _unpinned is not None:
        os.sched_setaffinity(0, _unpinned)
