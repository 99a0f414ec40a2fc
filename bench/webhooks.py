"""Benchmark webhook delivery to a local receiver: deliveries per second, and 201-to-receipt latency.

1. Throughput: N events are queued in the outbox, then `emissions deliver --once` drains them to a
   receiver on loopback; deliveries/s is N over the time from the first receipt to the last.
2. Latency: `emissions serve` runs (API plus its webhook scheduler, polling every
   WEBHOOK_POLL_SECONDS); M calculations are POSTed one after another, and for each the time from
   its 201 arriving at the client to its event arriving at the receiver is measured.

The receiver verifies every signature (webhook_signing.verify); a bad one is counted and reported.
Usage: .venv/bin/python bench/webhooks.py [--events 2000] [--calculations 200] [--poll 1,0.1]
[--database-url URL] (default: a fresh SQLite file). Writes JSON to bench/results/.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from emissions import auth  # noqa: E402
from emissions import factors  # noqa: E402
from emissions import migrations  # noqa: E402
from emissions import models  # noqa: E402
from emissions.db import bind  # noqa: E402
from emissions.webhooks import endpoints as webhook_endpoints  # noqa: E402
from emissions.webhooks import events as webhook_events  # noqa: E402
from emissions.webhooks import signing as webhook_signing  # noqa: E402
from run import free_port  # noqa: E402  beside this file: the benchmarks' shared helpers

RESULTS = HERE / "results"


class Receiver:
    """Keep-alive HTTP receiver: verifies each delivery, records when each event id arrived."""

    def __init__(self, secret: str = ""):
        self.secret = secret
        self.arrivals: dict[str, float] = {}
        self.calculation_arrivals: dict[str, float] = {}
        self.requests = 0
        self.bad_signatures = 0
        self.lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                arrived = time.perf_counter()
                try:
                    event_id = webhook_signing.verify(receiver.secret, self.headers, body)
                    good = True
                except webhook_signing.InvalidSignature:
                    event_id, good = None, False
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                data = json.loads(body)["data"]
                with receiver.lock:
                    receiver.requests += 1
                    receiver.bad_signatures += not good
                    if event_id:
                        receiver.arrivals.setdefault(event_id, arrived)
                        if "id" in data:
                            receiver.calculation_arrivals.setdefault(data["id"], arrived)
                    receiver.lock.notify_all()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def wait(self, predicate, timeout: float) -> bool:
        with self.lock:
            return self.lock.wait_for(predicate, timeout)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def seed(database_url: str, receiver: Receiver) -> tuple[models.Organization, str]:
    """An organization with a customer, a factor, an all-scope test key and the receiver as endpoint."""
    database = bind(database_url)
    migrations.run(database)
    slug = f"bench-{int(time.time())}"
    org = models.Organization.create(slug=slug, name="Bench")
    models.Customer.create(organization=org, environment="test", reference="bench-customer", name="Bench")
    if not models.Factor.select().where(models.Factor.reference == "bench-webhooks-road").exists():
        factors.create("bench-webhooks-road", "ROAD", "0.1", "Bench road", "Bench", valid_from=dt.date(2025, 1, 1), actor="bench")
    _, key = auth.create_key(org, "test", list(models.SCOPES), auth.instance_secret(os.environ.get("SECRET_KEY")))
    _, receiver.secret = webhook_endpoints.set_endpoint(org.id, "test", receiver.url, actor="bench", allow_private_test=True)
    return org, key


def throughput(database_url: str, org: models.Organization, receiver: Receiver, events: int) -> dict:
    before = receiver.requests
    data = json.dumps({"bench": True, "padding": "x" * 900})  # about the size of a calculation
    with models.db.atomic():
        for _ in range(events):
            webhook_events.record_event(org.id, "test", "calculation.succeeded", data)
    start = len(receiver.arrivals)
    # The receiver is on loopback: an address test endpoints reach only where the operator allows it.
    env = {**os.environ, "DATABASE_URL": database_url, "WEBHOOK_ALLOW_PRIVATE_TEST": "true"}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "emissions", "deliver", "--once", "--json"], cwd=ROOT, env=env,
                            capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    times = sorted(receiver.arrivals.values())[start:]
    span = times[-1] - times[0]
    return {"events": events, "delivered": receiver.requests - before, "outcome": json.loads(result.stdout),
            "deliveries_per_second": round((len(times) - 1) / span, 1) if span > 0 else None,
            "process_wall_seconds": round(wall, 3)}


def latency(database_url: str, key: str, receiver: Receiver, calculations: int, poll: float) -> dict:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "WEBHOOK_POLL_SECONDS": str(poll),
           "WEBHOOK_ALLOW_PRIVATE_TEST": "true", "LOG_REQUESTS": "false", "RATE_LIMIT_PER_SECOND": "0"}
    server = subprocess.Popen([sys.executable, "-m", "emissions", "serve", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    session = requests.Session()
    try:
        for _ in range(100):
            try:
                session.get(base + "/healthz", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        created: dict[str, float] = {}
        run = f"{poll}-{time.time_ns()}"
        for number in range(calculations):
            body = {"customer_reference": "bench-customer", "external_reference": f"s-{number}", "mode": "ROAD",
                    "origin": {"code": "GBLON"}, "destination": {"code": "GBMNC"},
                    "cargo": {"value": 10, "unit": "tonne"}, "distance": {"value": 100, "unit": "km"},
                    "activity_date": "2026-03-01", "factor_reference": "bench-webhooks-road"}
            response = session.post(base + "/v1/emissions/logistics", json=body, timeout=10, headers={
                "Authorization": f"Bearer {key}", "Idempotency-Key": f"{run}-{number}"})
            created[response.json()["id"]] = time.perf_counter()
            assert response.status_code == 201, response.text
            time.sleep(0.01)
        complete = receiver.wait(lambda: all(c in receiver.calculation_arrivals for c in created), 60)
        latencies = [(receiver.calculation_arrivals[c] - t) * 1000 for c, t in created.items()
                     if c in receiver.calculation_arrivals]
    finally:
        server.terminate()
        server.wait(30)
    return {"poll_seconds": poll, "calculations": calculations, "received": len(latencies), "complete": complete,
            "median_ms": round(statistics.median(latencies), 1), "p99_ms": round(percentile(latencies, 0.99), 1),
            "max_ms": round(max(latencies), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--calculations", type=int, default=200)
    parser.add_argument("--poll", default="1,0.1", help="WEBHOOK_POLL_SECONDS values to measure latency at")
    parser.add_argument("--database-url")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="bench-webhooks-")
    database_url = args.database_url or f"sqlite:///{workdir}/bench.sqlite3"
    receiver = Receiver()
    org, key = seed(database_url, receiver)
    result = {
        "benchmark": "webhooks",
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "database": database_url.split(":", 1)[0],
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "throughput": throughput(database_url, org, receiver, args.events),
        "latency": [latency(database_url, key, receiver, args.calculations, float(poll))
                    for poll in args.poll.split(",")],
    }
    result["bad_signatures"] = receiver.bad_signatures
    receiver.close()

    t = result["throughput"]
    print(f"throughput: {t['delivered']} deliveries, {t['deliveries_per_second']}/s "
          f"(deliver --once took {t['process_wall_seconds']} s including start-up)")
    for row in result["latency"]:
        print(f"201 -> receipt at WEBHOOK_POLL_SECONDS={row['poll_seconds']}: median {row['median_ms']} ms, "
              f"p99 {row['p99_ms']} ms, max {row['max_ms']} ms ({row['received']}/{row['calculations']} received)")
    print(f"bad signatures: {result['bad_signatures']}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"webhooks-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
