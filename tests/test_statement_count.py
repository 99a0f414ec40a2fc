"""The SQL statements each hot request sends, counted exactly, so that they cannot creep back.

Every statement the service sends goes through a cursor of the database (Peewee's execute_sql,
BEGIN and COMMIT alike); the counter wraps that cursor. docs/performance.md says why each one
is there.
"""
from __future__ import annotations

import pytest
from webtest import TestApp

from emissions import db
from emissions import models
from emissions.webhooks import endpoints as webhook_endpoints
from emissions.app import create_app
from conftest import logistics_body, record_statements

pytestmark = pytest.mark.on_both

POST_NEW = ["SELECT", "BEGIN", "INSERT", "INSERT", "INSERT", "INSERT", "INSERT", "INSERT", "COMMIT"]  # lookup;
# calculation, usage counter, customer rollup, its day and month rollup rows (one statement), the organization's
# day row, webhook event in one transaction


@pytest.fixture
def warm_client(config, acme):
    """The API with the key cache on (as served) and the key already looked up once."""
    client = TestApp(create_app(config.with_(key_cache_seconds=3600)))
    client.get("/v1/customers/cust-1", headers=acme.headers())
    return client


def post(client, persona, key: str, status: int):
    return client.post_json("/v1/emissions/logistics", logistics_body(), headers=persona.headers(key), status=status)


def test_a_new_calculation_is_one_lookup_and_one_transaction_of_six_writes(warm_client, acme, statements):
    with statements as sent:
        post(warm_client, acme, "count-new", 201)
    assert sent == POST_NEW


def test_a_new_calculation_with_a_webhook_endpoint_sends_the_same_statements(warm_client, acme, statements):
    webhook_endpoints.set_endpoint(acme.org.id, "test", "http://127.0.0.1:9/hook", actor="test", allow_private_test=True)
    with statements as sent:
        post(warm_client, acme, "count-hook", 201)
    assert sent == POST_NEW
    assert models.WebhookEvent.get().delivery_status == "pending"


def test_a_replay_of_a_calculation_this_process_made_sends_no_statement(warm_client, acme, statements):
    post(warm_client, acme, "count-replay", 201)
    with statements as sent:
        post(warm_client, acme, "count-replay", 200)
    assert sent == []


def forget_calculations(client) -> None:
    """As if another instance (or this one before a restart) had made them."""
    client.app.recent.forget()


def test_a_replay_of_a_calculation_another_instance_made_is_one_select_then_none(warm_client, acme, statements):
    post(warm_client, acme, "count-elsewhere", 201)
    forget_calculations(warm_client)
    for expected in (["SELECT"], []):
        with statements as sent:
            post(warm_client, acme, "count-elsewhere", 200)
        assert sent == expected


def test_reading_a_calculation_this_process_made_sends_no_statement(warm_client, acme, statements):
    calculation_id = post(warm_client, acme, "count-get", 201).json["id"]
    with statements as sent:
        warm_client.get(f"/v1/calculations/{calculation_id}", headers=acme.headers(), status=200)
    assert sent == []


def test_reading_a_calculation_another_instance_made_is_one_select_then_none(warm_client, acme, statements):
    calculation_id = post(warm_client, acme, "count-get-elsewhere", 201).json["id"]
    forget_calculations(warm_client)
    for expected in (["SELECT"], []):
        with statements as sent:
            warm_client.get(f"/v1/calculations/{calculation_id}", headers=acme.headers(), status=200)
        assert sent == expected


def analytics_statements(warm_client, persona, statements, query: str = "") -> tuple[list, list, int]:
    """The statements of one analytics read, then of the same read again; and its calculation_count."""
    sent = []
    for _ in range(2):
        with statements as log:
            response = warm_client.get("/v1/customers/cust-1/emissions" + query, headers=persona.headers(), status=200)
        sent.append(list(log))
    return sent[0], sent[1], response.json["analytics"]["calculation_count"]


# On SQLite the answer is kept with the database's PRAGMA data_version and its connection's changes
# (sql.unchanged_since): a read the database has not changed since is the PRAGMA alone, any other
# the PRAGMA and one SELECT. PostgreSQL has no such counter: every read is one SELECT.
def reads() -> tuple[list, list]:
    if db.is_postgres():
        return ["SELECT"], ["SELECT"]
    return ["PRAGMA", "SELECT"], ["PRAGMA"]


@pytest.mark.parametrize("query", ["", "?from=2026-02-15&to=2026-12-31"])
def test_customer_analytics_is_one_select_then_none_while_nothing_changes(warm_client, acme, statements, query):
    post(warm_client, acme, "count-analytics", 201)
    assert analytics_statements(warm_client, acme, statements, query) == (*reads(), 1)


def test_customer_analytics_after_a_write_of_this_process_is_one_select_again(warm_client, acme, statements):
    analytics_statements(warm_client, acme, statements)
    post(warm_client, acme, "count-after", 201)
    assert analytics_statements(warm_client, acme, statements) == (*reads(), 1)


def test_customer_analytics_without_calculations_is_one_select(warm_client, acme, statements):
    assert analytics_statements(warm_client, acme, statements) == (*reads(), 0)


def test_a_key_not_in_the_cache_costs_one_more_select(client, acme, statements):
    # The conftest app caches keys for 0 seconds: every request looks its key up.
    post(client, acme, "count-cold", 201)
    forget_calculations(client)
    with statements as sent:
        post(client, acme, "count-cold", 200)
    assert sent == ["SELECT", "SELECT"]
    with statements as sent:
        post(client, acme, "count-cold-new", 201)
    assert sent == ["SELECT"] + POST_NEW
