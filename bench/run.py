"""Benchmark the service against the bare framework and a same-work peer, side by side, in one run.

Starts `emissions serve` on a fresh SQLite file (seeded through the CLI), the bare Bottle app on
Waitress with the same thread count (bench/bare_app.py) and the same-work peer on a copy of the
seeded file (bench/same_work_peer.py: the calculation route written plainly with Peewee's ORM and
jsonschema, on Waitress's default threads); drives each scenario with wrk, every scenario once per
round so that the machine's background load touches all alike; then measures one worker against
two (bench/workers.py). Prints requests/s, p50 and p99 per scenario, then each floor of
docs/performance.md with PASS or FAIL, as Markdown tables to paste there. Writes the results as
JSON to bench/results/. Exit status 0 when every floor holds.

Usage: .venv/bin/python bench/run.py [--rounds 3] [--duration 3] [--no-workers]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from emissions import config  # the service's own (installed with it), for its default thread count

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
BIN = Path(sys.executable).parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# (name, scenario, baseline, at least this many times the baseline's requests/s)
FLOORS = [
    ("fresh POST / same-work peer POST", "post_new", "peer_post", 3.0),
    ("GET calculation / same-work peer GET", "get_calculation", "peer_get", 3.0),
    ("GET calculation / bare GET", "get_calculation", "bare_get", 0.75),
    ("replay / bare POST", "post_replay", "bare_post", 0.70),
    ("customer analytics / bare GET", "get_customer_analytics", "bare_get", 0.65),
]
# Reported beside the floors, never a floor: the distance to a hello-world, not to what users could pick.
REPORTED = [("fresh POST / bare POST", "post_new", "bare_post")]
P99_CEILING = 3.5  # each service scenario's p99 at most this many times its bare baseline's
WORKERS_FLOOR = 1.5  # 2 workers against 1, POST and GET (bench/workers.py)
BASELINE = {"post_new": "bare_post", "post_replay": "bare_post", "get_calculation": "bare_get",
            "get_customer_analytics": "bare_get"}
BODY = {
    "customer_reference": "bench-customer",
    "external_reference": "shipment-0001",
    "mode": "ROAD",
    "origin": {"code": "GBLON", "label": "London", "country": "GB"},
    "destination": {"code": "GBMNC", "label": "Manchester", "country": "GB"},
    "cargo": {"value": 12.5, "unit": "tonne"},
    "distance": {"value": 320, "unit": "km"},
    "activity_date": "2026-03-01",
    "factor_reference": "bench-road",
}

# One wrk script per scenario. `response` checks every status, `request` (fresh keys only) gives
# each request its own Idempotency-Key; `done` prints one JSON line that run.py parses.
LUA = r"""
wrk.method = "{method}"
wrk.path = "{path}"
{headers}
wrk.body = {body}
local expected = {expected}
local fresh = {fresh}
local threads = {{}}
local counter = 0

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  unexpected = 0
  prefix = "{label}-" .. tid .. "-"
end

if fresh then
  function request()
    counter = counter + 1
    wrk.headers["Idempotency-Key"] = prefix .. counter
    return wrk.format()
  end
end

function response(status, headers, body)
  if status ~= expected then
    unexpected = unexpected + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + thread:get("unexpected")
  end
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {{"requests": %d, "duration_us": %d, "unexpected_status": %d, "connect": %d, ' ..
    '"read": %d, "write": %d, "timeout": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, ' ..
    '"max_us": %d, "mean_us": %.1f}}\n',
    summary.requests, summary.duration, bad, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


def ensure_wrk() -> str:
    """The wrk binary; installed from Debian's packages when missing (needs root or sudo)."""
    found = shutil.which("wrk")
    if found:
        return found
    print("wrk is not installed; installing it with apt-get (Debian package 'wrk') ...", flush=True)
    prefix = [] if os.geteuid() == 0 else ["sudo"]
    install = prefix + ["apt-get", "install", "-y", "-q", "wrk"]
    if subprocess.run(install, stdout=subprocess.DEVNULL).returncode != 0:
        # A fresh machine may have no package lists yet.
        subprocess.run(prefix + ["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(install, check=True, stdout=subprocess.DEVNULL)
    found = shutil.which("wrk")
    if not found:
        sys.exit("bench: wrk is still not on PATH after apt-get install wrk")
    return found


def cli(env: dict, *args: str) -> dict:
    """Run one `emissions ... --json` command and return its JSON."""
    done = subprocess.run([str(BIN / "emissions"), *args, "--json"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench: emissions {' '.join(args)} failed: {done.stderr.strip()}")
    return json.loads(done.stdout) if done.stdout.strip() else {}


def seed(env: dict) -> str:
    """Organization, all-scope test key, customer and factor, through the operator CLI; returns the key."""
    cli(env, "migrate")
    cli(env, "org", "create", "--name", "Bench", "--slug", "bench")
    cli(env, "org", "update", "bench", "--test-capacity", "1000000000")
    cli(env, "customer", "create", "--org", "bench", "--env", "test", "--reference", "bench-customer",
        "--name", "Bench Customer Ltd", "--country", "GB")
    cli(env, "factor", "create", "--reference", "bench-road", "--mode", "ROAD", "--value", "0.12522",
        "--name", "Road, HGV average", "--source", "bench", "--valid-from", "2025-01-01")
    scopes = "emissions:calculate,emissions:read,customers:read,customer-analytics:read"
    return cli(env, "key", "create", "--org", "bench", "--env", "test", "--scopes", scopes)["key"]


def service_env(database_url: str, threads: int) -> dict:
    """The environment every benchmarked server runs in: the defaults, but no rate limit (one key
    sends every request) and the installation's own secret."""
    env = {**os.environ, "DATABASE_URL": database_url, "RATE_LIMIT_PER_SECOND": "0", "THREADS": str(threads)}
    env.pop("LOG_REQUESTS", None)
    env.pop("SECRET_KEY", None)
    return env


def add_pin_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server-cpu", type=int, default=max(os.sched_getaffinity(0)),
                        help="the CPU every server is pinned to; wrk runs on the others (default: the last)")
    parser.add_argument("--no-pin", action="store_true",
                        help="let the servers and wrk run on any CPU (see docs/performance.md)")


def check_pin_arguments(parser: argparse.ArgumentParser, args) -> None:
    if not args.no_pin and args.server_cpu not in os.sched_getaffinity(0):
        parser.error(f"--server-cpu {args.server_cpu} is not one of this process's CPUs "
                     f"{sorted(os.sched_getaffinity(0))}")


def pin_servers(args) -> set[int] | None:
    """The CPUs the servers get (None: any), after moving this process, and so wrk, off them."""
    if args.no_pin or len(os.sched_getaffinity(0)) < 2:
        return None
    server_cpus = {args.server_cpu}
    os.sched_setaffinity(0, os.sched_getaffinity(0) - server_cpus)  # wrk inherits it
    return server_cpus


def start(command: list[str], env: dict, log_path: Path, cpus: set[int] | None = None) -> tuple[subprocess.Popen, str]:
    """Start a server that prints 'Serving on http://host:port' and return it with its URL."""
    log = open(log_path, "wb")
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log, cwd=ROOT, preexec_fn=pin)
    line = process.stdout.readline().decode()
    match = re.search(r"Serving on (http://\S+)", line)
    if not match:
        process.kill()
        sys.exit(f"bench: {command[0]} did not start: {line!r}; see {log_path}")
    return process, match.group(1)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def free_port() -> int:
    """A loopback port free at this moment."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http(method: str, url: str, headers: dict, body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    with urllib.request.urlopen(request) as response:
        return response.status, json.loads(response.read())


def lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


def wrk_script(directory: Path, name: str, method: str, path: str, headers: dict, body: str,
               expected: int, fresh: bool, label: str) -> Path:
    lines = "\n".join(f'wrk.headers["{k}"] = {lua_string(v)}' for k, v in headers.items())
    script = directory / f"{name}.lua"
    script.write_text(LUA.format(method=method, path=path, headers=lines,
                                 body=lua_string(body) if body else "nil", expected=expected,
                                 fresh="true" if fresh else "false", label=label))
    return script


def run_wrk(wrk: str, url: str, script: Path, seconds: float, connections: int, threads: int,
            server_pid: int) -> dict:
    """One wrk run; adds the CPU seconds wrk and the server used during it."""
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = cpu_seconds(server_pid)
    done = subprocess.run([wrk, "-t", str(threads), "-c", str(connections), "-d", f"{int(seconds)}s",
                           "--timeout", "5s", "-s", str(script), url], capture_output=True, text=True)
    server_cpu = cpu_seconds(server_pid) - server_before
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    match = re.search(r"^WRK_RESULT (.*)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not match:
        sys.exit(f"bench: wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    result = json.loads(match.group(1))
    wall = result["duration_us"] / 1e6
    errors = sum(result[k] for k in ("unexpected_status", "connect", "read", "write", "timeout"))
    return {
        "requests": result["requests"],
        "seconds": round(wall, 3),
        "requests_per_second": round(result["requests"] / wall, 1),
        "p50_ms": result["p50_us"] / 1000,
        "p90_ms": result["p90_us"] / 1000,
        "p99_ms": result["p99_us"] / 1000,
        "max_ms": result["max_us"] / 1000,
        "errors": errors,
        "error_breakdown": {k: result[k] for k in ("unexpected_status", "connect", "read", "write", "timeout")},
        "server_cpu_percent": round(100 * server_cpu / wall, 1),
        "wrk_cpu_percent": round(100 * ((after_children.ru_utime - before_children.ru_utime)
                                        + (after_children.ru_stime - before_children.ru_stime)) / wall, 1),
    }


def combine(runs: list[dict]) -> dict:
    """One scenario over all rounds: total requests over total time; the median round's p50 and
    p99 (wrk reports percentiles per run, not the samples to merge); the worst round's max."""
    seconds = sum(run["seconds"] for run in runs)

    def median(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    return {
        "requests": sum(run["requests"] for run in runs),
        "seconds": round(seconds, 3),
        "requests_per_second": round(sum(run["requests"] for run in runs) / seconds, 1),
        "p50_ms": median("p50_ms"),
        "p90_ms": median("p90_ms"),
        "p99_ms": median("p99_ms"),
        "max_ms": max(run["max_ms"] for run in runs),
        "errors": sum(run["errors"] for run in runs),
        "server_cpu_percent": round(sum(r["server_cpu_percent"] * r["seconds"] for r in runs) / seconds, 1),
        "wrk_cpu_percent": round(sum(r["wrk_cpu_percent"] * r["seconds"] for r in runs) / seconds, 1),
        "rounds": runs,
    }


def settle(database: Path) -> None:
    """Copy what the fresh-POST scenario wrote to the write-ahead log into the database, from here.

    Otherwise the service's checkpoint thread does it during the next scenarios, and a GET would
    be measured paying for the POSTs before it (the POST scenario itself paid for its own share:
    the thread checkpoints every 0.05 s while it runs).
    """
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def machine() -> dict:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model.group(1).strip() if model else platform.processor(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
    }


def floors(results: dict, workers: dict | None) -> list[dict]:
    """Every floor with its measured ratio and whether it holds; the reported ratios with holds None."""
    checked = []
    for name, scenario, baseline, floor in FLOORS:
        ratio = results[scenario]["requests_per_second"] / results[baseline]["requests_per_second"]
        checked.append({"floor": name, "measured": round(ratio, 2), "required": f">= {floor:.2f}x",
                        "holds": ratio >= floor})
    for scenario, baseline in BASELINE.items():
        ratio = results[scenario]["p99_ms"] / max(results[baseline]["p99_ms"], 0.001)
        checked.append({"floor": f"p99 {scenario} / p99 {baseline}", "measured": round(ratio, 2),
                        "required": f"<= {P99_CEILING:.2f}x", "holds": ratio <= P99_CEILING})
    errors = sum(result["errors"] for result in results.values())
    if workers is not None:
        for scenario, ratio in workers["ratios"].items():
            checked.append({"floor": f"2 workers / 1 worker, {scenario}", "measured": round(ratio, 2),
                            "required": f">= {WORKERS_FLOOR:.2f}x", "holds": ratio >= WORKERS_FLOOR})
        errors += sum(result["errors"] for result in workers["scenarios"].values())
    checked.append({"floor": "errors (all scenarios)", "measured": errors, "required": "0", "holds": errors == 0})
    for name, scenario, baseline in REPORTED:
        ratio = results[scenario]["requests_per_second"] / results[baseline]["requests_per_second"]
        checked.append({"floor": name, "measured": round(ratio, 2), "required": "reported", "holds": None})
    return checked


def markdown(report: dict) -> str:
    """The run as the two tables docs/performance.md shows."""
    settings = report["settings"]
    lines = [f"Run of {report['taken_at']} on {report['machine']['cpu_model']} ({report['machine']['nproc']} CPUs), "
             f"Python {report['machine']['python']}, SQLite {report['machine']['sqlite']}; "
             f"{settings['server_threads']} Waitress thread(s), {settings['connections']} connections, "
             f"{settings['rounds']} rounds of {settings['seconds_per_round']} s.", "",
             "| scenario | requests/s | p50 ms | p99 ms | errors | server CPU us/request |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, result in {**report["scenarios"], **(report["workers"] or {}).get("scenarios", {})}.items():
        cpu = result["server_cpu_percent"] * 10_000 / result["requests_per_second"]
        lines.append(f"| {name} | {result['requests_per_second']:.0f} | {result['p50_ms']:.2f} | "
                     f"{result['p99_ms']:.2f} | {result['errors']} | {cpu:.0f} |")
    lines += ["", "| floor | measured | required | result |", "|---|---:|---:|---|"]
    for floor in report["floors"]:
        measured = floor["measured"] if isinstance(floor["measured"], int) else f"{floor['measured']:.2f}x"
        result = "-" if floor["holds"] is None else "PASS" if floor["holds"] else "FAIL"
        lines.append(f"| {floor['floor']} | {measured} | {floor['required']} | {result} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=3, help="seconds measured per scenario and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all scenarios")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of warm-up per scenario")
    parser.add_argument("--connections", type=int, default=16, help="concurrent keep-alive connections")
    parser.add_argument("--threads", type=int, default=None,
                        help="Waitress threads of every server (default: the service's own default on SQLite)")
    add_pin_arguments(parser)
    parser.add_argument("--wrk-threads", type=int, default=1, help="wrk's own threads")
    parser.add_argument("--no-workers", action="store_true",
                        help="skip the 1-worker/2-worker measurement (its floors then go unchecked: exit 1)")
    args = parser.parse_args()
    check_pin_arguments(parser, args)
    import workers  # beside this file; it imports this module, so not at the top
    wrk = ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="emissions-bench-"))
    database_url = f"sqlite:///{workdir / 'bench.sqlite3'}"
    threads = args.threads or config.default_threads(database_url)
    env = service_env(database_url, threads)
    key = seed(env)
    # The peer works on the same seeded rows (same key, secret, customer and factor): a copy.
    settle(workdir / "bench.sqlite3")
    shutil.copyfile(workdir / "bench.sqlite3", workdir / "peer.sqlite3")

    all_cpus = os.sched_getaffinity(0)
    server_cpus = pin_servers(args)
    service, service_url = start([str(BIN / "emissions"), "serve", "--port", "0"], env, workdir / "service.log",
                                 server_cpus)
    bare, bare_url = start([sys.executable, str(HERE / "bare_app.py"), "--threads", str(threads)],
                           env, workdir / "bare.log", server_cpus)
    # No --threads: Waitress's default, as a first deployment of it would run.
    peer, peer_url = start([sys.executable, str(HERE / "same_work_peer.py"), "--database", str(workdir / "peer.sqlite3")],
                           env, workdir / "peer.log", server_cpus)
    try:
        body = json.dumps(BODY)
        post_headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        status, first = http("POST", service_url + "/v1/emissions/logistics",
                             {**post_headers, "Idempotency-Key": "bench-replay"}, body.encode())
        assert status == 201, status
        status, peer_first = http("POST", peer_url + "/v1/emissions/logistics",
                                  {**post_headers, "Idempotency-Key": "bench-replay"}, body.encode())
        assert status == 201, status
        replay_headers = {**post_headers, "Idempotency-Key": "bench-replay"}
        get_headers = {"Authorization": f"Bearer {key}"}
        label = dt.datetime.now().strftime("%H%M%S")
        scenarios = [
            # name, server, method, path, headers, body, expected status, fresh keys
            ("bare_post", bare, bare_url, "POST", "/bare", replay_headers, body, 201, False),
            ("bare_get", bare, bare_url, "GET", "/bare", get_headers, "", 200, False),
            ("peer_post", peer, peer_url, "POST", "/v1/emissions/logistics", post_headers, body, 201, True),
            ("peer_get", peer, peer_url, "GET", f"/v1/calculations/{peer_first['id']}", get_headers, "", 200, False),
            ("post_new", service, service_url, "POST", "/v1/emissions/logistics", post_headers, body, 201, True),
            ("post_replay", service, service_url, "POST", "/v1/emissions/logistics", replay_headers, body, 200,
             False),
            ("get_calculation", service, service_url, "GET", f"/v1/calculations/{first['id']}", get_headers, "",
             200, False),
            ("get_customer_analytics", service, service_url, "GET", "/v1/customers/bench-customer/emissions",
             get_headers, "", 200, False),
        ]
        placement = (f"servers on CPU {args.server_cpu}, wrk on the others" if server_cpus
                     else "servers and wrk on any CPU")
        print(f"wrk: {args.connections} connections, {args.wrk_threads} thread(s); servers: "
              f"{threads} Waitress thread(s); {placement}; {args.warmup} s warm-up, then {args.rounds} rounds of "
              f"{args.duration} s per scenario", flush=True)
        for name, process, url, method, path, headers, request_body, expected, fresh in scenarios:
            script = wrk_script(workdir, f"{name}-warmup", method, path, headers, request_body, expected, fresh,
                                f"{label}-{name}-warmup")
            run_wrk(wrk, url, script, args.warmup, args.connections, args.wrk_threads, process.pid)
            if fresh:
                settle(workdir / ("peer.sqlite3" if process is peer else "bench.sqlite3"))
        rounds: dict[str, list] = {scenario[0]: [] for scenario in scenarios}
        for number in range(args.rounds):
            for name, process, url, method, path, headers, request_body, expected, fresh in scenarios:
                script = wrk_script(workdir, f"{name}-{number}", method, path, headers, request_body, expected,
                                    fresh, f"{label}-{name}-{number}")
                rounds[name].append(run_wrk(wrk, url, script, args.duration, args.connections, args.wrk_threads,
                                            process.pid))
                if fresh:
                    settle(workdir / ("peer.sqlite3" if process is peer else "bench.sqlite3"))
        results = {name: combine(runs) for name, runs in rounds.items()}
    finally:
        stop(service)
        stop(bare)
        stop(peer)

    workers_measured = None
    if not args.no_workers:
        if server_cpus:
            os.sched_setaffinity(0, all_cpus)  # the workers need every CPU, and wrk runs beside them
        workers_measured = workers.measure(wrk, args.rounds, args.duration, args.warmup, workers.CONNECTIONS,
                                           args.wrk_threads, workdir)

    report = {
        "taken_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "settings": {"connections": args.connections, "wrk_threads": args.wrk_threads,
                     "server_threads": threads, "peer_threads": "Waitress default", "seconds_per_round": args.duration, "rounds": args.rounds,
                     "warmup_seconds": args.warmup, "server_cpu": args.server_cpu if server_cpus else None,
                     "rate_limit": "disabled", "database": "SQLite (fresh file, db.SQLITE_PRAGMAS)"},
        "scenarios": results,
        "workers": workers_measured,
    }
    report["floors"] = floors(results, workers_measured)
    report["all_floors_hold"] = workers_measured is not None and all(
        floor["holds"] for floor in report["floors"] if floor["holds"] is not None)
    print()
    print(markdown(report))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "latest.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nresults: {out.relative_to(ROOT)}; {'every floor holds' if report['all_floors_hold'] else 'a floor FAILED'}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if report["all_floors_hold"] else 1


if __name__ == "__main__":
    sys.exit(main())
