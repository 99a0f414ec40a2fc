"""CPU_AFFINITY: each serving process on one CPU of its own (emissions/affinity.py), on real processes."""
from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emissions import affinity
from conftest import EMISSIONS, cli_json, output_until_serving
from test_production import children_of



# --- parse and plan --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, setting", [
    ("auto", "auto"),
    ("off", "off"),
    ("  OFF ", "off"),
    ("0-3,6", (0, 1, 2, 3, 6)),
    ("2", (2,)),
    ("3,1,1,0-3", (3, 1, 0, 2)),  # in the order given, each CPU once
])
def test_parse_reads_auto_off_and_cpu_lists(text, setting):
    assert affinity.parse(text) == setting


@pytest.mark.parametrize("text", ["1-0", "x", "", "3-", "-3", "0,,1", "1-2-3", "0-3,"])
def test_parse_refuses_what_is_no_cpu_list(text):
    with pytest.raises(ValueError):
        affinity.parse(text)


def test_parse_refuses_a_range_beyond_any_machine():
    with pytest.raises(ValueError, match="beyond CPU"):
        affinity.parse("0-999999999")


def test_plan_off_leaves_every_worker_to_the_kernel():
    assert affinity.plan("off", 3) == [None, None, None]


def test_plan_goes_round_a_cpu_list_by_worker_index(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {4, 6, 7})
    assert affinity.plan((4, 6), 5) == [4, 6, 4, 6, 4]
    with pytest.raises(ValueError, match="names CPU 5, which this process may not use"):
        affinity.plan((4, 5), 1)


def test_plan_auto_starts_at_the_cpu_the_kernel_chose_and_goes_round_the_allowed(monkeypatch):
    # The allowed set, the current CPU and the cgroup are the operating system's: what a test cannot arrange.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5, 2, 9})
    monkeypatch.setattr(affinity, "cpu_time_capped", lambda: False)
    monkeypatch.setattr(affinity, "current_cpu", lambda: 5)
    assert affinity.plan("auto", 4) == [5, 9, 2, 5]
    monkeypatch.setattr(affinity, "current_cpu", lambda: None)
    assert affinity.plan("auto", 2) == [2, 5]


def test_plan_auto_pins_nothing_with_one_cpu_or_a_cpu_time_cap(monkeypatch):
    monkeypatch.setattr(affinity, "cpu_time_capped", lambda: False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert affinity.plan("auto", 2) == [None, None]
    assert affinity.plan((3,), 1) == [3]  # a list is taken as given
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(affinity, "cpu_time_capped", lambda: True)
    assert affinity.plan("auto", 2) == [None, None]


def test_current_cpu_reads_field_39_of_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    fields = [str(number) for number in range(3, 53)]
    fields[39 - 3] = "7"
    stat.write_text("1234 (emis sions) (x) " + " ".join(fields) + "\n")  # a name may hold spaces and parentheses
    assert affinity.current_cpu(stat) == 7
    assert affinity.current_cpu(tmp_path / "missing") is None
    assert affinity.current_cpu(Path("/proc/self/stat")) in os.sched_getaffinity(0)


@pytest.mark.parametrize("cgroup, files, capped", [
    ("0::/\n", {"cpu.max": "max 100000"}, False),
    ("0::/\n", {"cpu.max": "200000 100000"}, True),  # a container limited to 2 CPUs
    ("0::/system.slice/emissions.service\n", {"system.slice/emissions.service/cpu.max": "50000 100000"}, True),
    ("0::/a/b\n", {"a/cpu.max": "100000 100000", "a/b/cpu.max": "max 100000"}, True),  # a cap above
    ("0::/a/b\n", {}, False),
    ("1:cpu,cpuacct:/docker/x\n0::/\n", {"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "150000"}, True),
    ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1"}, False),  # cgroup v1 without a quota (this machine's kind)
    ("4:memory:/x\n", {"memory/x/memory.max": "1"}, False),
], ids=["v2-none", "v2-container", "v2-systemd-unit", "v2-parent", "v2-no-files", "v1-docker", "v1-none",
        "other-controllers"])
def test_cpu_time_capped_reads_the_cgroup_and_those_above_it(tmp_path, cgroup, files, capped):
    (tmp_path / "cgroup").write_text(cgroup)
    root = tmp_path / "sys"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    assert affinity.cpu_time_capped(tmp_path / "cgroup", root) is capped


def test_a_pin_the_system_refuses_is_a_warning_and_the_process_serves_unpinned(monkeypatch, caplog):
    calls = []

    def refuse(pid, cpus):  # a sandbox's policy (EPERM): what a test cannot arrange
        calls.append(cpus)
        if cpus == {0}:
            raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    monkeypatch.setattr(affinity, "_unpinned", None)
    assert affinity.pin(0) is False
    assert "could not run on CPU 0" in caplog.text and "serving unpinned" in caplog.text
    assert calls[-1] == os.sched_getaffinity(0)  # put back as it was
    made = len(calls)
    affinity.release_this_thread()  # nothing was pinned: nothing to release
    assert len(calls) == made


# --- a setting that cannot be used -----------------------------------------------------------------

@pytest.mark.parametrize("value, message", [
    ("garbage", "CPU_AFFINITY must be auto, off or a CPU list such as 0-3,6"),
    (str(max(os.sched_getaffinity(0)) + 1), f"CPU_AFFINITY names CPU {max(os.sched_getaffinity(0)) + 1}, "
                                            "which this process may not use"),
], ids=["garbage", "cpu not allowed"])
def test_a_cpu_affinity_that_cannot_be_used_stops_serve_with_one_line(tmp_path, value, message):
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'e.sqlite3'}", "CPU_AFFINITY": value}
    result = subprocess.run([str(EMISSIONS), "serve", "--port", "0"], env=environment, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1, result
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("emissions: ") and message in line, line
    assert "Traceback" not in result.stderr


# --- served processes --------------------------------------------------------------------------------

def allowed_cpus() -> set[int]:
    """The CPUs this test process may use; skips the test unless the served ones can be told apart."""
    if not Path("/proc/self/task").is_dir():
        pytest.skip("needs /proc to read each thread's CPUs")
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip(f"needs at least 2 allowed CPUs, this process may use {sorted(allowed)}")
    return allowed


def thread_cpus(pid: int) -> dict[int, set[int]]:
    """Each thread of process `pid` and the CPUs it may run on (Cpus_allowed_list, e.g. 0-1 or 0,2)."""
    threads = {}
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        threads[int(status.parent.name)] = set(affinity.parse(fields["Cpus_allowed_list"]))
    return threads


@contextlib.contextmanager
def served(tmp_path, monkeypatch, *argv, **env):
    """`emissions serve --port 0 ARGV` on a migrated SQLite file; SIGTERM and a clean exit at the end."""
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'served.sqlite3'}")
    cli_json("migrate")
    environment = {key: value for key, value in os.environ.items() if key != "CPU_AFFINITY"}
    process = subprocess.Popen([str(EMISSIONS), "serve", "--port", "0", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**environment, "WEBHOOK_POLL_SECONDS": "60", "LOG_REQUESTS": "false", **env})
    try:
        yield process
    finally:
        process.terminate()  # the parent of --workers stops its workers, which hold the output pipes too
        try:
            out, err = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate(timeout=30)
            raise
    assert process.returncode == 0, err
    assert "Stopped." in out + err


def test_serve_puts_every_thread_on_the_cpu_it_prints(tmp_path, monkeypatch):
    allowed = allowed_cpus()
    with served(tmp_path, monkeypatch) as process:
        line = output_until_serving(process).splitlines()[-1]
        printed = re.fullmatch(r"Serving on http://127\.0\.0\.1:\d+ \(threads=\d+, CPU (\d+)\)", line)
        assert printed, line
        cpu = int(printed.group(1))
        assert cpu in allowed  # auto: where the kernel placed it
        pinned, released = settled_threads(process.pid, allowed)
        assert len(pinned) > 2, pinned  # the main thread, Waitress's request thread(s), the scheduler...
        assert set(pinned.values()) == {cpu}
        assert len(released) == 1, released  # the WAL checkpointer: SQLite's copying needs no interpreter lock


def settled_threads(pid: int, allowed: set[int]) -> tuple[dict, dict]:
    """(threads on one CPU, threads on every allowed CPU) of a served process, once its WAL
    checkpointer has left the serving CPU (it does so first thing, just after serving begins)."""
    for _ in range(500):
        threads = thread_cpus(pid)
        released = {tid: cpus for tid, cpus in threads.items() if cpus == allowed}
        if released:
            break
        time.sleep(0.01)
    pinned = {tid: next(iter(cpus)) for tid, cpus in threads.items() if len(cpus) == 1}
    assert len(pinned) + len(released) == len(threads), threads
    return pinned, released


def test_a_sign_in_s_scrypt_runs_off_the_pinned_cpu(tmp_path):
    """The hashing pool's threads leave the serving CPU: scrypt runs without the interpreter lock,
    and on the serving CPU a sign-in would take tens of milliseconds from the requests."""
    allowed = allowed_cpus()
    script = (
        "import os, json\n"
        "from emissions import affinity\n"
        "from emissions import accounts\n"
        f"affinity.pin({min(allowed)})\n"
        "hasher = accounts.Hasher()\n"
        "print(json.dumps([sorted(os.sched_getaffinity(0)), sorted(hasher.run(os.sched_getaffinity, 0))]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[min(allowed)], sorted(allowed)]


def test_serve_with_cpu_affinity_off_leaves_every_thread_on_the_allowed_cpus(tmp_path, monkeypatch):
    allowed = allowed_cpus()
    with served(tmp_path, monkeypatch, "--json", CPU_AFFINITY="off") as process:
        announced = json.loads(process.stdout.readline())
        assert announced["cpu"] is None
        threads = thread_cpus(process.pid)
        assert len(threads) > 2, threads
        assert threads == dict.fromkeys(threads, allowed)


def test_serve_allowed_one_cpu_is_left_alone(tmp_path, monkeypatch):
    """Under `taskset -c N` (or in a one-CPU container) auto pins nothing, and the line says none."""
    allowed = allowed_cpus()
    os.sched_setaffinity(0, {max(allowed)})  # this thread's CPUs, which the server inherits; put back below
    try:
        with served(tmp_path, monkeypatch) as process:
            line = output_until_serving(process).splitlines()[-1]
            assert set().union(*thread_cpus(process.pid).values()) == {max(allowed)}
    finally:
        os.sched_setaffinity(0, allowed)
    assert re.fullmatch(r"Serving on http://127\.0\.0\.1:\d+ \(threads=\d+\)", line), line


def test_each_of_two_workers_runs_all_its_threads_on_a_cpu_of_its_own(tmp_path, monkeypatch):
    allowed = allowed_cpus()
    with served(tmp_path, monkeypatch, "--workers", "2", "--json") as process:
        announced = json.loads(process.stdout.readline())
        cpus = announced["cpus"]
        assert len(set(cpus)) == 2 and set(cpus) <= allowed, announced
        workers = children_of(process.pid)  # in the order they were forked: worker 0 first
        assert len(workers) == 2, workers
        on = []
        for pid in workers:
            pinned, released = settled_threads(pid, allowed)
            assert len(pinned) > 1 and len(released) == 1, (pinned, released)  # but its WAL checkpointer
            [cpu] = set(pinned.values())  # every other thread of the worker on the one CPU
            on.append(cpu)
        assert on == cpus
        parent = thread_cpus(process.pid)  # the parent only waits: not pinned
        assert parent == dict.fromkeys(parent, allowed)
