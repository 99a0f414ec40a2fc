"""The API's latency while sign-ins are attempted: does password hashing slow the API down?

Serves the service as `emissions serve` does (Waitress, the default thread count for SQLite: 1) on
a fresh SQLite file, measures GET /v1/customers/<ref> p50/p99 alone, then again while 4 threads
send wrong-password sign-ins as fast as they are answered. Run twice: with the sign-in throttle as
shipped (attempts from one address are slowed after a burst) and with the throttle switched off
(--no-throttle: what many attacking addresses would get), where only the bounded hashing pool stands
between the attempts and the API. Usage: .venv/bin/python bench/sign_in.py [--seconds 5] [--no-throttle]
"""
from __future__ import annotations

import argparse
import logging
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path

import requests

from emissions import auth
from emissions import workspace
from emissions.app import create_app
from emissions.config import Config
from emissions.models import Customer, Organization, SCOPES
from emissions.serving.server import create_server


def serve(app, threads: int):
    server = create_server(app, "127.0.0.1", 0, threads)
    threading.Thread(target=server.run, daemon=True).start()
    return server, f"http://127.0.0.1:{server.effective_port}"


def api_latencies(url: str, key: str, seconds: float) -> list[float]:
    session = requests.Session()
    found, stop = [], time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.perf_counter()
        session.get(f"{url}/v1/customers/bench", headers={"Authorization": f"Bearer {key}"}, timeout=30)
        found.append((time.perf_counter() - started) * 1000)
        time.sleep(0.005)
    return found


def attack(url: str, stop: threading.Event, answers: dict) -> None:
    session = requests.Session()
    while not stop.is_set():
        page = session.get(f"{url}/workspace/login", timeout=30)
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        answer = session.post(f"{url}/workspace/login", data={"csrf": csrf, "email": "ops@bench.example",
                                                             "password": "wrong password!!"}, timeout=30,
                              allow_redirects=False)
        answers[answer.status_code] = answers.get(answer.status_code, 0) + 1


def summary(values: list[float]) -> str:
    values = sorted(values)
    return (f"p50 {statistics.median(values):.1f} ms, p99 {values[int(len(values) * 0.99) - 1]:.1f} ms "
            f"({len(values)} requests)")


def main() -> None:
    logging.getLogger("waitress").setLevel(logging.ERROR)  # its queue-depth warning, once per request
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--no-throttle", action="store_true")
    parser.add_argument("--threads", type=int, help="Waitress threads (default: the service's for SQLite)")
    args = parser.parse_args()
    directory = tempfile.mkdtemp()
    config = Config(database_url=f"sqlite:///{Path(directory) / 'bench.sqlite3'}", log_requests=False,
                    rate_limit_per_second=0)
    app = create_app(config)
    org = Organization.create(slug="bench", name="Bench")
    Customer.create(organization=org, environment="test", reference="bench", name="Bench")
    workspace.create_user(org, "ops@bench.example", "correct horse battery", actor="bench")
    _, key = auth.create_key(org, "test", list(SCOPES), auth.instance_secret(None))
    if args.no_throttle:
        for route in app.routes:
            if route.rule == "/workspace/login":
                route.callback.__wrapped__.__self__.throttle.wait = lambda email, address: 0
    threads = args.threads or config.serving_threads
    server, url = serve(app, threads)
    print(f"threads={threads} throttle={'off' if args.no_throttle else 'on'}")
    print("API alone:          ", summary(api_latencies(url, key, args.seconds)))
    stop, answers = threading.Event(), {}
    attackers = [threading.Thread(target=attack, args=(url, stop, answers), daemon=True) for _ in range(4)]
    for thread in attackers:
        thread.start()
    time.sleep(0.5)
    print("API during sign-ins:", summary(api_latencies(url, key, args.seconds)))
    stop.set()
    for thread in attackers:
        thread.join(30)
    print("sign-in answers by status:", dict(sorted(answers.items())))
    server.close()


if __name__ == "__main__":
    main()
