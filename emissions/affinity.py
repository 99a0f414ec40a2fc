"""CPU_AFFINITY: each serving process on one CPU of its own.

CPython runs one thread of a process at a time. A served request passes between Waitress's
polling thread and a request thread several times, and when the kernel keeps those threads on
different CPUs, every pass is a wake-up of another CPU; on a virtual machine that costs more than
the request's own work. So `serve` puts each worker's threads on one CPU. What it gains is measured
in docs/performance.md, "CPU pinning".

`auto` pins only where the CPUs are the process's to use: not when its cgroup caps its CPU time (a
container with a CPU limit, a systemd unit with CPUQuota=), where the kernel must stay free to run
it on any CPU, and not when it may use a single CPU anyway. It starts at the CPU the kernel placed
the process on, so that separate instances started on one machine tend to land apart.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

AUTO, OFF = "auto", "off"
MAX_CPU = 4095  # beyond any machine this runs on; bounds what a typo can ask for

log = logging.getLogger("emissions.error")


def parse(text: str) -> str | tuple[int, ...]:
    """'auto', 'off', or a CPU list such as '0-3,6' as a tuple of CPU numbers; ValueError if none."""
    lowered = text.strip().lower()
    if lowered in (AUTO, OFF):
        return lowered
    cpus: dict[int, None] = {}  # ordered, each CPU once
    for part in lowered.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"{part.strip()!r} is not a CPU number or range")
        low, high = int(first), int(last if dash else first)
        if high < low:
            raise ValueError(f"{part.strip()!r} is a range that runs backwards")
        if high > MAX_CPU:
            raise ValueError(f"{part.strip()!r} goes beyond CPU {MAX_CPU}")
        cpus.update(dict.fromkeys(range(low, high + 1)))
    return tuple(cpus)


def plan(setting: str | tuple[int, ...], workers: int) -> list[int | None]:
    """The CPU of each of `workers` serving processes (None: left to the kernel), worker i on the
    i-th CPU of the list, round and round. A listed CPU this process may not use is a ValueError."""
    if setting == OFF or not hasattr(os, "sched_setaffinity"):
        return [None] * workers
    allowed = sorted(os.sched_getaffinity(0))
    if setting == AUTO:
        if len(allowed) < 2 or cpu_time_capped():
            return [None] * workers
        here = current_cpu()
        start = allowed.index(here) if here in allowed else 0
        cpus = allowed[start:] + allowed[:start]
    else:
        outside = [cpu for cpu in setting if cpu not in allowed]
        if outside:
            raise ValueError(f"CPU_AFFINITY names CPU {outside[0]}, which this process may not use "
                             f"(it may use {','.join(map(str, allowed))})")
        cpus = list(setting)
    return [cpus[index % len(cpus)] for index in range(workers)]


def current_cpu(stat: Path = Path("/proc/self/stat")) -> int | None:
    """The CPU this process last ran on (field 39 of /proc/self/stat), if Linux says."""
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def cpu_time_capped(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> bool:
    """Whether this process's cgroup, or one above it, caps its CPU time (cgroup v2 `cpu.max`, v1
    `cpu.cfs_quota_us`)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            bases, limit_file = [root, root / "unified"], "cpu.max"
        elif "cpu" in controllers.split(","):
            bases, limit_file = [root / controllers, root / "cpu"], "cpu.cfs_quota_us"
        else:
            continue
        parts = [part for part in path.split("/") if part]
        for base in bases:
            for depth in range(len(parts), -1, -1):
                try:
                    quota = (base.joinpath(*parts[:depth]) / limit_file).read_text().split()[0]
                except (OSError, IndexError):
                    continue
                if quota not in ("max", "-1"):
                    return True
    return False


_unpinned: set[int] | None = None  # the CPUs this process could use before pin(), once pinned


def pin(cpu: int) -> bool:
    """Put every thread of this process on `cpu` (threads started later inherit it); False, with a
    warning, where the system refuses (a sandbox's policy, a CPU set changed meanwhile).

    sched_setaffinity(0) moves only the calling thread, so each thread of /proc/self/task is moved.
    """
    global _unpinned
    before = os.sched_getaffinity(0)
    try:
        for task in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(task), {cpu})
            except ProcessLookupError:  # a thread that ended meanwhile
                pass
    except OSError as exc:
        log.warning("CPU_AFFINITY: could not run on CPU %d (%s); serving unpinned", cpu, exc)
        _put_back(before)
        return False
    if _unpinned is None:
        _unpinned = before
    return True


def release_this_thread() -> None:
    """Let the calling thread run on any CPU the process could use before pin().

    For threads whose work runs with the interpreter lock released (SQLite's WAL checkpoint, scrypt
    for a sign-in): on the serving CPU they would take their whole run from the requests, and
    elsewhere they hand the lock over rarely. Nothing to do in a process that was not pinned.
    """
    if _unpinned is not None:
        try:
            os.sched_setaffinity(0, _unpinned)
        except OSError:  # the CPU set changed meanwhile: the thread stays where it is
            pass


def _put_back(cpus: set[int]) -> None:
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = [str(os.getpid())]
    for task in tasks:
        try:
            os.sched_setaffinity(int(task), cpus)
        except OSError:
            pass
