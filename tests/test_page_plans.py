"""Every workspace page reads what it shows, not the history (issue 24): each statement a page or a
CSV export sends is planned by the database, and none reads calculation, webhook_event,
webhook_attempt, audit_event, shipment or shipment_hub whole or sorts a whole set of them.

The statements are caught as the pages send them, so a page that changes, or a new one in PAGES,
is checked without naming its queries here."""
from __future__ import annotations

import re

import peewee as pw
import pytest

from emissions import models
from emissions import workspace
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.workspace import session as workspace_session
from conftest import make_customer, post_calculation, record_statements, workspace_of
from helpers import plan, post, worked_example

HISTORY = ("calculation", "webhook_event", "webhook_attempt", "audit_event", "shipment", "shipment_hub")


@pytest.fixture
def signed_in(app, client, acme, library):  # noqa: F811
    """acme with calculations of two customers, a shipment, an endpoint with an attempt, and its
    workspace user's session in the client's cookie."""
    make_customer(acme.org, "cust-2")
    created = [post_calculation(client, acme, f"k-{n}", status=201, customer_reference=customer).json
               for n, customer in enumerate(["cust-1", "cust-2", "cust-1"])]
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hook", actor="test",
                                   allow_private_test=True)
    created.append(post_calculation(client, acme, "k-hooked", status=201).json)
    event = models.WebhookEvent.get(models.WebhookEvent.calculation_id == created[-1]["id"])
    models.WebhookAttempt.create(event=event.id, number=1, url="http://127.0.0.1:9/hook", status_code=500)
    shipment = post(client, acme, worked_example(), status=201).json
    user = workspace.create_user(acme.org, "ops@acme.example", "a long enough password", actor="cli")
    client.set_cookie(workspace_session.COOKIE, workspace_of(app).sessions.issue(user))
    return created, shipment


def pages(created, shipment, client) -> list[str]:
    """Every page a signed-in person reads, with each filter of the list and each period of a customer."""
    after = re.search(r"after=([0-9]{13}_[0-9a-f-]{36})", client.get(
        "/workspace/calculations", {"customer": "cust-1"}).text.replace("&amp;", "&"))
    customer_periods = [f"/workspace/customers/cust-1?period={choice}" for choice, _ in workspace.insights.PERIOD_CHOICES
                        if choice != "custom"]
    return [
        "/workspace",
        "/workspace?period=all",
        "/workspace?period=custom&from=2026-01-01&to=2026-06-30",
        "/workspace/calculations",
        "/workspace/calculations?customer=cust-1",
        "/workspace/calculations?mode=AIR",
        "/workspace/calculations?from=2020-01-01&to=2030-12-31",
        "/workspace/calculations?activity_from=2026-01-01&activity_to=2026-12-31",
        "/workspace/calculations?customer=cust-1&mode=ROAD&activity_from=2026-01-01&from=2020-01-01",
        "/workspace/calculations?customer=nobody",
        f"/workspace/calculations?after=9999999999999_{created[0]['id']}",
        f"/workspace/calculations?customer=cust-1&after=9999999999999_{created[0]['id']}",
        *([f"/workspace/calculations?customer=cust-1&after={after.group(1)}"] if after else []),
        "/workspace/calculations.csv",
        "/workspace/calculations.csv?customer=cust-2&mode=SEA",
        "/workspace/calculations.csv?activity_from=2026-01-01",
        f"/workspace/calculations/{created[0]['id']}",
        f"/workspace/calculations/{created[-1]['id']}",
        "/workspace/customers",
        "/workspace/customers?after=cust-1",
        *customer_periods,
        "/workspace/customers/cust-1?period=custom&from=2026-01-01&to=2026-06-30",
        "/workspace/customers/cust-1?period=all&format=csv",
        "/workspace/customers/cust-1?period=this-year&format=statement",
        "/workspace/shipments",
        f"/workspace/shipments/{shipment['id']}",
        "/workspace/webhooks",
        "/workspace/keys",
        "/workspace/team",
        "/workspace/audit",
    ]


def tables_of(statement: str) -> dict[str, str]:
    """The tables a statement reads, by the name its plan gives them (peewee's alias, or the table)."""
    named = dict((alias, table) for table, alias in re.findall(r'"(\w+)" AS "(\w+)"', statement))
    for _, table in re.findall(r'(?:FROM|JOIN)\s+("?)(\w+)\1(?![\w"])(?!\s+AS\b)', statement):
        named.setdefault(table, table)
    return named


def problems_of(statement: str, params: tuple) -> list[str]:
    """What in the statement's plan reads history: a scan of a HISTORY table, or a sort of their rows,
    except a sort of a list of ids (a page's events), of the ties of an index's order, or of one
    customer's index entries (the statement shows the customer's period whole). A statement that names
    one customer must read that customer's index, and a keyset page must seek to where it starts."""
    named = tables_of(statement)
    history = {name for name, table in named.items() if table in HISTORY}
    if not history:
        return []
    text = plan(statement, params)
    if isinstance(models.db.obj, pw.PostgresqlDatabase):
        return [line for line in text.splitlines()
                if re.search(r"Seq Scan on (\w+)", line) and re.search(r"Seq Scan on (\w+)", line).group(1) in HISTORY]
    found = []
    for name in history:
        searched = " ".join(re.findall(rf"SEARCH {name} USING .*", text))
        column = rf'(?:"{name}"\.)?"?'
        # One customer's rows come through the customer's index, not a walk of the organization's.
        if re.search(rf'{column}customer_id"? = \?', statement) and "customer_id=?" not in searched:
            found.append(f"{name} not searched by customer_id: {searched}")
        # A keyset page (or a creation date range) seeks to where it starts.
        if re.search(rf'{column}created_at"?\)? < ', statement) and "created_at" not in searched:
            found.append(f"{name} not searched by created_at: {searched}")
    for line in text.splitlines():
        scan = re.match(r"\s*SCAN (\w+)", line)
        if scan and scan.group(1) in history:
            # An ordered walk of an index that stops at the LIMIT is a page, not the history.
            if not (" USING " in line and re.search(r"LIMIT \?$", statement)):
                found.append(line)
        if "USE TEMP B-TREE" in line and "RIGHT PART OF ORDER BY" not in line:
            by_ids = re.search(r'"(event_id|id)" IN \(\?', statement)
            # One customer's period: grouped (a row per factor), or ordered from its index entries alone.
            one_customer = re.search(r"SEARCH \w+ USING {}INDEX \w+ \(customer_id=\?\)".format(
                "(COVERING )?" if "GROUP BY" in line else "COVERING "), text)
            recent = "created_at>?" in text and "GROUP BY" in line  # an endpoint's last 7 days, by outcome
            if not (by_ids or one_customer or recent):
                found.append(line)
    return found


@pytest.mark.on_both
def test_every_page_reads_through_indexes_and_sorts_no_history(client, signed_in, monkeypatch):
    created, shipment = signed_in
    sent: list[tuple[str, tuple]] = []
    record_statements(monkeypatch, lambda statement, params: sent.append((statement, params)))
    checked = 0
    for url in pages(created, shipment, client):
        sent.clear()
        response = client.get(url, status="*")
        assert response.status_int in (200, 404), (url, response.status_int)
        reads = [(statement, params) for statement, params in sent
                 if statement.lstrip().upper().startswith(("SELECT", "WITH"))]
        assert reads, url
        for statement, params in reads:
            found = problems_of(statement, params)
            assert not found, (url, statement, found)
            checked += bool(set(tables_of(statement).values()) & set(HISTORY))
    assert checked > 40


def test_the_check_fails_on_a_read_of_the_history(app):
    """problems_of sees what issue 24 found: the overview's list sorting every calculation of the
    organization, and an endpoint's last attempt sorting every attempt."""
    whole = ('SELECT "t1"."id" FROM "calculation" AS "t1" WHERE ("t1"."organization_id" = ?) '
             'ORDER BY "t1"."external_reference" DESC LIMIT ?')
    attempts = ('SELECT "t1"."id" FROM "webhook_attempt" AS "t1" INNER JOIN "webhook_event" AS "t2" ON '
                '("t1"."event_id" = "t2"."id") WHERE ("t2"."organization_id" = ?) ORDER BY "t1"."number" DESC LIMIT ?')
    scan = 'SELECT COUNT(*) FROM "audit_event" AS "t1" WHERE ("t1"."actor" = ?)'
    for statement, params in ((whole, (1, 8)), (attempts, (1, 1)), (scan, ("cli",))):
        assert problems_of(statement, params), statement


def test_no_page_sends_more_statements_for_more_calculations(client, signed_in, acme, monkeypatch):
    """A page's statements are as many with more calculations and delivered events (no statement per
    row beyond what the page shows): what it costs depends on what it shows, not on the history."""
    created, shipment = signed_in
    urls = [url for url in pages(created, shipment, client) if ".csv" not in url and "format=csv" not in url]
    sent: list = []
    record_statements(monkeypatch, lambda statement, params: sent.append(statement))

    def counts() -> dict[str, int]:
        found = {}
        for url in urls:
            sent.clear()
            client.get(url, status="*")
            found[url] = len(sent)
        return found

    before = counts()
    for number in range(8):
        post_calculation(client, acme, f"more-{number}", status=201,
                         customer_reference="cust-2" if number % 2 else "cust-1")
    assert counts() == before


@pytest.mark.on_both
def test_the_overview_reads_the_organizations_day_rows_by_their_key(client, signed_in, monkeypatch):
    """The month's figures and the 30-day chart come from a row per day, mode and business context of
    the organization, found by the key: not from its customers' day rows, which grow with the customers."""
    sent: list[tuple[str, tuple]] = []
    record_statements(monkeypatch, lambda statement, params: sent.append((statement, params)))
    client.get("/workspace", status=200)
    assert not [statement for statement, _ in sent if "customer_period_rollup" in statement]
    [(statement, params)] = [found for found in sent if "organization_period_rollup" in found[0]]
    text = plan(statement, params)
    if isinstance(models.db.obj, pw.PostgresqlDatabase):
        assert "organization_period_rollup_key" in text and "Seq Scan" not in text, text
    else:
        assert re.search(r"SEARCH \w+ USING PRIMARY KEY \(organization_id=\? AND environment=\? AND span=\?"
                         r" AND activity_date>\? AND activity_date<\?\)", text), text
        assert "TEMP B-TREE" not in text, text
