"""Helpers several test files share: signing in to the workspace, checking a response against the
OpenAPI document, query plans, racing requests, the shipments' worked example, the documented
configuration, a clean environment for the package, and waiting on a condition with a deadline."""
from __future__ import annotations

import contextlib
from html.parser import HTMLParser
import itertools
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import jsonschema
import peewee as pw
import pytest
import requests
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from emissions import config as config_module
from emissions import db as db_setup
from emissions import models
from emissions import schemas
from emissions.db import is_postgres, open_database
from conftest import FAKETIME_SHIM, PASSWORD, POSTGRES_URL, TERMINAL, record_statements

ROOT = Path(__file__).resolve().parent.parent


def wait_until(condition: Callable[[], object], timeout: float = 30.0, what: str = "the condition",
               interval: float = 0.01):
    """Poll `condition` until it returns something true, and return that; fail naming `what` once
    `timeout` seconds pass without it."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)


def csrf_token(page) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def sign_in(client, email="ops@acme.example", password=PASSWORD, status=303, address="192.0.2.1", **environ):
    """Sign in through the form; where the password is checked off the serving thread, pick the
    answer up from /workspace/login/wait as the browser does (its page looks again at once)."""
    environ = {"REMOTE_ADDR": address, **environ}
    page = client.get("/workspace/login", extra_environ=environ)
    response = client.post("/workspace/login", {"csrf": csrf_token(page), "email": email, "password": password},
                           extra_environ=environ, expect_errors=True)
    for _ in range(1000):
        waiting = response.status_int == 303 and response.headers["Location"].endswith("/workspace/login/wait")
        if not (waiting or "Signing you in" in response.text):
            break
        if not waiting:
            time.sleep(0.005)
        response = client.get("/workspace/login/wait", extra_environ=environ, expect_errors=True)
    assert response.status_int == status, response.text
    return response


def create_key(client, environment="test", scopes=("emissions:calculate", "emissions:read"), status=303,
               name="ci", **fields):
    """Post the key form; on success follow the redirect to the page that shows the key once."""
    page = client.get("/workspace/keys")
    form = [("csrf", csrf_token(page)), ("name", name), ("environment", environment)]
    form += [("scopes", scope) for scope in scopes] + list(fields.items())
    response = client.post("/workspace/keys", form, status=status)
    return response.follow() if status == 303 else response


def plan(statement: str, params: tuple) -> str:
    """The plan of a statement: SQLite's EXPLAIN QUERY PLAN, or PostgreSQL's EXPLAIN with sequential
    scans priced out (a test's tables are small enough that a scan would win anyway)."""
    database = models.db.obj
    if isinstance(database, pw.PostgresqlDatabase):
        with database.atomic():
            database.execute_sql("SET LOCAL enable_seqscan = off")
            return "\n".join(row[0] for row in database.execute_sql("EXPLAIN " + statement, params))
    return "\n".join(row[-1] for row in database.execute_sql("EXPLAIN QUERY PLAN " + statement, params))


@contextlib.contextmanager
def empty_postgres_schema(name: str):
    """The URL of a new, empty PostgreSQL schema of this test process, dropped afterwards."""
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL tests need TEST_DATABASE_URL (set by .ci/run)")
    schema = f"{name}_{os.getpid()}"
    admin = open_database(POSTGRES_URL)
    admin.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    admin.execute_sql(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
    finally:
        if models.db.obj is not None:
            models.db.close()
        admin.execute_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()


DOCUMENT = json.loads(schemas.OPENAPI_PATH.read_text())


URI = "urn:test:openapi"


REGISTRY = Registry().with_resource(URI, Resource.from_contents(DOCUMENT, default_specification=DRAFT202012))


FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


def pointer(*parts: str) -> str:
    return "/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def resolve(node: dict) -> tuple[dict, str | None]:
    """Follow a local $ref; return the node and the JSON pointer it lives at (when it was a $ref)."""
    if "$ref" not in node:
        return node, None
    target = node["$ref"].removeprefix("#")
    node = DOCUMENT
    for part in target.strip("/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node, target


def schema_validator(location: str) -> jsonschema.Draft202012Validator:
    """A validator for the schema at a JSON pointer inside the document, refs resolved in the document."""
    return jsonschema.Draft202012Validator({"$ref": f"{URI}#{location}"}, registry=REGISTRY, format_checker=FORMATS)


def response_spec(path: str, method: str, status: int) -> tuple[str, dict]:
    """(JSON pointer of the response object, the response object) declared for an operation and status."""
    responses = DOCUMENT["paths"][path][method.lower()]["responses"]
    key = str(status) if str(status) in responses else f"{str(status)[0]}XX"
    assert key in responses, f"{method} {path} does not declare {status}"
    location = pointer("paths", path, method.lower(), "responses", key)
    response, target = resolve(responses[key])
    return target or location, response


def check_response(response, path: str, method: str) -> None:
    """The real response matches the document: status declared, body schema, declared headers present and valid."""
    location, spec = response_spec(path, method, response.status_int)
    assert response.content_type == "application/json"
    schema_location = location + pointer("content", "application/json", "schema")
    errors = [error.message for error in schema_validator(schema_location).iter_errors(response.json)]
    assert not errors, (response.status, errors, response.body[:500])
    for name, header in spec.get("headers", {}).items():
        header, _ = resolve(header)
        assert name in response.headers, f"{response.status} lacks the declared header {name}"
        assert jsonschema.Draft202012Validator(header["schema"], format_checker=FORMATS).is_valid(
            response.headers[name]), (name, response.headers[name])
    if "X-Request-Id" in spec.get("headers", {}) and response.status_int >= 400:
        assert response.json["error"]["request_id"] == response.headers["X-Request-Id"]


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what would point a command at this tree or its database."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "DATABASE_URL", "PYTHONHOME", "VIRTUAL_ENV")}
    if "FAKETIME" in environment:  # a year ahead (.ci/run): only the sleep shim, none of this tree
        environment["PYTHONPATH"] = str(FAKETIME_SHIM)
    return {**environment, **extra}


def site_packages(venv: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


def worked_example(**overrides) -> dict:
    """Shanghai to a warehouse in Manchester: truck, ship to Felixstowe, terminal, truck."""
    body = {
        "customer_reference": "cust-1",
        "external_reference": "PO-4711",
        "activity_date": "2026-03-01",
        "cargo": {"value": 2, "unit": "TEU"},
        "elements": [
            {"type": "leg", "mode": "ROAD", "origin": {"label": "Factory, Songjiang", "country": "CN"},
             "destination": {"locode": "CNSHA"}, "distance": {"value": 48.5, "unit": "km"}},
            {"type": "leg", "mode": "SEA", "origin": {"locode": "CNSHA"}, "destination": {"locode": "GBFXT"}},
            {"type": "hub", "hub_type": "container_terminal", "location": {"locode": "GBFXT"},
             "factor_reference": TERMINAL},
            {"type": "leg", "mode": "ROAD", "origin": {"locode": "GBFXT"},
             "destination": {"label": "Warehouse, Trafford Park", "country": "GB"},
             "distance": {"value": 372.4, "unit": "km"}},
        ],
    }
    body.update(overrides)
    return body


def post(client, persona, body, key="ship-1", status="*"):
    return client.post_json("/v1/shipments", body, headers=persona.headers(key), status=status)


def aggregate(bodies: list[dict]) -> dict:
    parts = [body["emissions"]["breakdown"] for body in bodies if "breakdown" in body["emissions"]]
    return {"calculation_count": len(bodies),
            "activity": {"value": sum((b["activity"]["value"] for b in bodies), Decimal(0)), "unit": "tkm"},
            "emissions": {"value": sum((b["emissions"]["value"] for b in bodies), Decimal(0)), "unit": "kgCO2e",
                          "breakdown": {
                              "ttw": sum((p["ttw"] for p in parts), Decimal(0)),
                              "wtt": sum((p["wtt"] for p in parts), Decimal(0)),
                              "unattributed": sum((b["emissions"]["value"] for b in bodies
                                                   if "breakdown" not in b["emissions"]), Decimal(0))}}}


def expected_analytics(bodies: list[dict], start: str | None, end: str | None) -> dict:
    """The analytics of the period computed from the calculations themselves."""
    inside = [b for b in bodies if (start is None or b["activity_date"] >= start)
              and (end is None or b["activity_date"] <= end)]
    dates = sorted(b["activity_date"] for b in inside)
    return {
        "environment": "test",
        **aggregate(inside),
        "by_mode": {mode: aggregate([b for b in inside if b["mode"] == mode])
                    for mode in ("ROAD", "SEA", "AIR") if any(b["mode"] == mode for b in inside)},
        "by_business_context": {
            context: aggregate([b for b in inside if b["methodology"]["business_context"] == context])
            for context in ("upstream", "downstream")
            if any(b["methodology"]["business_context"] == context for b in inside)},
        "first_activity_date": dates[0] if dates else None,
        "last_activity_date": dates[-1] if dates else None,
        "period": {"from": start, "to": end},
        "by_month": [{"month": month, **aggregate([b for b in inside if b["activity_date"][:7] == month])}
                     for month in sorted({b["activity_date"][:7] for b in inside})],
    }


class BlockedWriters:
    """Counts the requests that wait behind the write lock this test holds: on SQLite, those that
    sent their BEGIN (each waits there, its lookup done), on PostgreSQL those pg_locks shows."""

    def __init__(self, monkeypatch, table: str = "calculation"):
        self.table = table
        self.holder = threading.current_thread()
        self.began = threading.Semaphore(0)
        record_statements(monkeypatch, self.note)

    def note(self, statement: str, params) -> None:
        if statement.startswith("BEGIN") and threading.current_thread() is not self.holder:
            self.began.release()

    def wait_for(self, count: int) -> None:
        """Return once `count` requests wait to write."""
        if not is_postgres():
            for number in range(count):
                assert self.began.acquire(timeout=30), f"only {number} of {count} requests reached the insert"
            return
        for _ in range(1500):
            waiting = models.db.execute_sql(
                f"SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = '{self.table}'::regclass").fetchone()[0]
            if waiting >= count:
                return
            time.sleep(0.02)
        raise AssertionError(f"only {waiting} of {count} requests reached the insert")


def race(url: str, requests_to_send: list[tuple[dict, bytes]], hold_writes: bool = False,
         table: str = "calculation") -> list:
    """Send every request at once from its own thread; return the responses in order.

    With hold_writes, the test holds `table`'s write lock until every request has
    looked its key up and waits to insert: all of them then take the path where the unique key
    decides, not the lookup.
    """
    barrier = threading.Barrier(len(requests_to_send))
    responses: list = [None] * len(requests_to_send)

    def send(index: int, headers: dict, body: bytes) -> None:
        with requests.Session() as session:
            barrier.wait()
            try:
                responses[index] = session.post(url, data=body, headers=headers, timeout=60)
            except requests.RequestException as exc:  # reported by the assertion below
                responses[index] = exc

    threads = [threading.Thread(target=send, args=(index, *request))
               for index, request in enumerate(requests_to_send)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        if hold_writes:
            # The key's use is noted now: a racing request that wrote it would wait on the held lock before its lookup.
            noted = requests.get(url.split("/v1/")[0] + "/v1/customers/cust-1", timeout=30,
                                 headers={"Authorization": requests_to_send[0][0]["Authorization"]})
            assert noted.status_code == 200, noted.text
            blocked = BlockedWriters(monkeypatch, table)
        with models.db.atomic() if hold_writes else contextlib.nullcontext():
            if hold_writes and db_setup.is_postgres():
                models.db.execute_sql(f"LOCK TABLE {table} IN EXCLUSIVE MODE")  # reads pass, inserts wait
            for thread in threads:
                thread.start()
            if hold_writes:
                blocked.wait_for(len(threads))
        for thread in threads:
            thread.join()
    assert all(isinstance(response, requests.Response) for response in responses), responses
    return responses


def variables_read_in_config() -> set[str]:
    source = Path(config_module.__file__).read_text()
    return set(re.findall(r"""env_[a-z]+\(\s*["']([A-Z][A-Z0-9_]*)["']""", source))


VARIABLE_TABLE = "| variable | default | meaning |"


def documented_rows() -> list[tuple[str, str, str]]:
    """Every row of every table headed `| variable | default | meaning |` in docs/*.md: (file, name, default)."""
    rows = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        lines = path.read_text().splitlines()
        for start, line in enumerate(lines):
            if line.strip() != VARIABLE_TABLE:
                continue
            for row in itertools.takewhile(lambda text: text.startswith("|"), lines[start + 2:]):
                found = re.match(r"^\| `([A-Z][A-Z0-9_]*)` \| ([^|]*) \|", row)
                assert found, f"{path.name}: not a variable row: {row}"
                rows.append((path.name, found.group(1), found.group(2)))
    return rows


def documented_configuration() -> dict[str, str]:
    """The variables the docs' tables document: variable -> default."""
    return {name: default for _, name, default in documented_rows()}


class Tables(HTMLParser):
    """Every table of a page: its id and its rows, each cell's text and data-value."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: list[tuple[str, list[list[tuple[str, str | None]]]]] = []
        self._cell: list | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append((attrs.get("id", ""), []))
        elif tag == "tr":
            self.tables[-1][1].append([])
        elif tag in ("td", "th"):
            self._cell = ["", attrs.get("data-value")]

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].append((self._cell[0].strip(), self._cell[1]))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data


@contextlib.contextmanager
def serving_document(document: dict, tmp_path: Path, monkeypatch) -> Iterator[dict]:
    """The service reading `document` instead of its own OpenAPI document (its caches emptied on the way
    in and out)."""
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(document))
    caches = [value for value in vars(schemas).values() if hasattr(value, "cache_clear")]
    monkeypatch.setattr(schemas, "OPENAPI_PATH", path)
    for cache in caches:
        cache.cache_clear()
    try:
        yield document
    finally:
        monkeypatch.undo()
        for cache in caches:
            cache.cache_clear()
