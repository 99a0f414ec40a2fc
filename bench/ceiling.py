"""How fast could a fresh POST be if storing it cost nothing? A diagnostic beside bench/run.py.

Serves, as run.py does (fresh seeded SQLite file, servers pinned to one CPU, wrk on the others):
the bare app, the real `emissions serve`, and the same service with its write transaction
replaced by nothing (bench/no_writes_serve.py: the same request handling and lookup, no writes).
It drives a POST with fresh idempotency keys at each, in turns, and prints each one's ratio to the
bare POST, and the real service's to the one storing nothing. Not a target: it measures how much
of the 0.5x target storing leaves (README, "Performance").
Usage: .venv/bin/python bench/ceiling.py [--rounds 3] [--duration 3]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
from pathlib import Path

from emissions import config
import run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=3, help="seconds measured per server and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the three servers")
    parser.add_argument("--connections", type=int, default=16, help="concurrent keep-alive connections")
    run.add_pin_arguments(parser)
    args = parser.parse_args()
    run.check_pin_arguments(parser, args)
    wrk = run.ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="emissions-ceiling-"))
    database = workdir / "bench.sqlite3"
    threads = config.default_threads("sqlite://")
    env = run.service_env(f"sqlite:///{database}", threads)
    key = run.seed(env)
    cpus = run.pin_servers(args)
    servers = {
        "bare_post": run.start([sys.executable, str(run.HERE / "bare_app.py"), "--threads", str(threads)],
                               env, workdir / "bare.log", cpus) + ("/bare",),
        "post_new": run.start([str(run.BIN / "emissions"), "serve", "--port", "0"], env,
                              workdir / "service.log", cpus) + ("/v1/emissions/logistics",),
        # -P: bench/ must not come first on its path (bench/webhooks.py is not the service's).
        "post_new_no_writes": run.start([sys.executable, "-P", str(run.HERE / "no_writes_serve.py"), "--port", "0"],
                                        env, workdir / "no-writes.log", cpus) + ("/v1/emissions/logistics",),
    }
    body = json.dumps(run.BODY)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
               "Idempotency-Key": "ceiling"}
    label = dt.datetime.now().strftime("%H%M%S")
    rounds: dict[str, list] = {name: [] for name in servers}
    try:
        for number in range(-1, args.rounds):  # round -1 warms every server up and is not counted
            for name, (process, url, path) in servers.items():
                bare = name == "bare_post"
                script = run.wrk_script(workdir, f"{name}-{number}", "POST", path, headers, body, 201,
                                        not bare, f"{label}-{name}-{number}")
                result = run.run_wrk(wrk, url, script, 2 if number < 0 else args.duration, args.connections,
                                     1, process.pid)
                if number >= 0:
                    rounds[name].append(result)
                if name == "post_new":
                    run.settle(database)
    finally:
        for process, _, _ in servers.values():
            run.stop(process)
        shutil.rmtree(workdir, ignore_errors=True)

    results = {name: run.combine(runs) for name, runs in rounds.items()}
    bare_rate = results["bare_post"]["requests_per_second"]
    placement = f"servers on CPU {args.server_cpu}" if cpus else "servers and wrk on any CPU"
    print(f"fresh POSTs, {args.connections} connections, {placement}, {args.rounds} rounds of {args.duration} s:")
    for name, result in results.items():
        print(f"  {name:20} {result['requests_per_second']:8.1f} req/s  "
              f"{result['requests_per_second'] / bare_rate:.2f}x bare_post  p99 {result['p99_ms']:6.2f} ms  "
              f"errors {result['errors']}")
    print(f"  post_new to post_new_no_writes: "
          f"{results['post_new']['requests_per_second'] / results['post_new_no_writes']['requests_per_second']:.2f}x")
    return 1 if any(result["errors"] for result in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
