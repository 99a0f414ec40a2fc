"""POST and GET throughput of `emissions serve --workers 2` against `--workers 1`, in one run.

Seeds two fresh SQLite files through the CLI, serves each (one worker, two workers; THREADS as the
service defaults), and drives the same scenarios at both with wrk, in turns, round after round, so
that the machine's background load touches both alike: a POST with fresh idempotency keys (a new
calculation each) and a GET of one calculation. Nothing is pinned: the workers need every core, and
wrk runs beside them (as a load balancer's traffic would not; the ratio is a floor). Prints req/s,
p50 and p99 of each and the 2-worker/1-worker ratio (the floor: at least 1.5), and writes the
results as JSON to bench/results/workers-*.json. bench/run.py runs the same measurement (measure())
after its own scenarios and checks the same floor.
Usage: .venv/bin/python bench/workers.py [--rounds 3] [--duration 5] [--connections 32]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from emissions import config
import run

FLOOR = 1.5  # docs/performance.md, "Floors"; bench/run.py checks it too
CONNECTIONS = 32
NAMES = ("post_new", "get_calculation")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and its children (the workers), from /proc."""
    total = run.cpu_seconds(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    for child in (children.read_text().split() if children.exists() else ()):
        total += run.cpu_seconds(int(child))
    return total


def measure(wrk: str, rounds: int, duration: int, warmup: int, connections: int, wrk_threads: int,
            workdir: Path) -> dict:
    """Each scenario's results at one and two workers, and the 2-worker/1-worker ratio of each."""
    servers = {}
    try:
        for workers in (1, 2):
            database_url = f"sqlite:///{workdir / f'workers-{workers}.sqlite3'}"
            env = {**run.service_env(database_url, config.default_threads(database_url)), "LOG_REQUESTS": "false"}
            key = run.seed(env)
            process, url = run.start([str(run.BIN / "emissions"), "serve", "--port", "0", "--workers", str(workers)],
                                     env, workdir / f"workers-{workers}.log")
            body = json.dumps(run.BODY)
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            status, first = run.http("POST", url + "/v1/emissions/logistics",
                                     {**headers, "Idempotency-Key": "bench-first"}, body.encode())
            assert status == 201, status
            servers[workers] = (process, url, key, first["id"], body, headers)

        label = dt.datetime.now().strftime("%H%M%S")

        def scenario(workers: int, name: str, tag: str):
            process, url, key, calculation_id, body, headers = servers[workers]
            if name == "post_new":
                script = run.wrk_script(workdir, f"{name}-{workers}-{tag}", "POST", "/v1/emissions/logistics",
                                        headers, body, 201, True, f"{label}-{workers}-{tag}")
            else:
                script = run.wrk_script(workdir, f"{name}-{workers}-{tag}", "GET", f"/v1/calculations/{calculation_id}",
                                        {"Authorization": f"Bearer {key}"}, "", 200, False, f"{label}-{workers}-{tag}")
            seconds = warmup if tag == "warmup" else duration
            cpu_before = tree_cpu_seconds(process.pid)
            result = run.run_wrk(wrk, url, script, seconds, connections, wrk_threads, process.pid)
            result["server_cpu_percent"] = round(100 * (tree_cpu_seconds(process.pid) - cpu_before)
                                                 / result["seconds"], 1)
            if name == "post_new":
                run.settle(workdir / f"workers-{workers}.sqlite3")
            return result

        print(f"workers: {connections} connections, {wrk_threads} wrk thread(s); servers: --workers 1 and 2, "
              f"{config.default_threads('sqlite://')} thread(s) each; nothing pinned; {os.cpu_count()} CPUs; "
              f"{warmup} s warm-up, then {rounds} rounds of {duration} s", flush=True)
        for name in NAMES:
            for workers in (1, 2):
                scenario(workers, name, "warmup")
        runs = {(name, workers): [] for name in NAMES for workers in (1, 2)}
        for number in range(rounds):
            for name in NAMES:
                for workers in ((1, 2) if number % 2 == 0 else (2, 1)):  # alternate who goes first
                    runs[(name, workers)].append(scenario(workers, name, str(number)))
    finally:
        for process, *_ in servers.values():
            run.stop(process)

    results = {f"{name}_workers_{workers}": run.combine(found) for (name, workers), found in runs.items()}
    ratios = {name: round(results[f"{name}_workers_2"]["requests_per_second"]
                          / results[f"{name}_workers_1"]["requests_per_second"], 3) for name in NAMES}
    return {"scenarios": results, "ratios": ratios}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds measured per scenario, server and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all scenarios")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of warm-up per scenario and server")
    parser.add_argument("--connections", type=int, default=CONNECTIONS,
                        help="concurrent keep-alive connections (the kernel spreads connections, not requests)")
    parser.add_argument("--wrk-threads", type=int, default=1, help="wrk's own threads")
    args = parser.parse_args()
    wrk = run.ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="emissions-workers-"))
    measured = measure(wrk, args.rounds, args.duration, args.warmup, args.connections, args.wrk_threads, workdir)
    results, ratios = measured["scenarios"], measured["ratios"]
    for key, result in results.items():
        print(f"  {key:26} {result['requests_per_second']:9.1f} req/s  p50 {result['p50_ms']:7.2f} ms"
              f"  p99 {result['p99_ms']:7.2f} ms  errors {result['errors']}"
              f"  (server CPU {result['server_cpu_percent']:.0f}%, wrk CPU {result['wrk_cpu_percent']:.0f}%)")
    errors = sum(result["errors"] for result in results.values())
    met = errors == 0 and all(ratio >= FLOOR for ratio in ratios.values())
    print("\n2 workers against 1: " + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items())
          + f" (floor >= {FLOOR}x)  {'met' if met else 'MISSED'}; errors: {errors}")
    report = {
        "taken_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": run.machine(),
        "settings": {"connections": args.connections, "wrk_threads": args.wrk_threads,
                     "threads_per_worker": config.default_threads("sqlite://"), "seconds_per_round": args.duration,
                     "rounds": args.rounds, "warmup_seconds": args.warmup, "pinned": False,
                     "rate_limit": "disabled", "database": "SQLite (fresh file per server)"},
        "scenarios": results,
        "ratios": ratios,
        "floor": FLOOR,
        "met": met,
    }
    run.RESULTS.mkdir(exist_ok=True)
    out = run.RESULTS / f"workers-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {out.relative_to(run.ROOT)}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
