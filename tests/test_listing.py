"""GET /v1/calculations: newest first, filtered, keyset pages, tenant-safe, every filter on an index."""
from __future__ import annotations

import datetime as dt
import json

import pytest

from emissions import calculations
from emissions import listing
from emissions import models
from conftest import logistics_body, make_customer, make_factor, make_key, post_calculation

UTC = dt.timezone.utc


@pytest.fixture
def clock(monkeypatch):
    """The time calculations are created at, set by the test."""
    now = [dt.datetime(2026, 10, 1, 9, 0, tzinfo=UTC)]
    monkeypatch.setattr(calculations, "utcnow", lambda: now[0])
    return now


def listed(client, persona, query: str = "", status: int = 200):
    return client.get("/v1/calculations" + (f"?{query}" if query else ""), headers=persona.headers(), status=status)


def ids(response) -> list[str]:
    return [calculation["id"] for calculation in response.json["data"]]


def make_calculations(client, persona, clock, count: int, **overrides) -> list[dict]:
    """`count` calculations a minute apart, oldest first; returns their bodies."""
    made = []
    for number in range(count):
        clock[0] += dt.timedelta(minutes=1)
        made.append(post_calculation(client, persona, f"list-{len(made)}-{overrides}", status=201,
                                     external_reference=f"shipment-{number}", **overrides).json)
    return made


@pytest.mark.on_both
def test_the_list_is_newest_first_and_each_item_is_the_stored_body_byte_for_byte(client, acme, clock):
    made = make_calculations(client, acme, clock, 3)
    response = listed(client, acme)
    assert response.json["object"] == "list" and response.json["has_more"] is False
    assert ids(response) == [body["id"] for body in reversed(made)]
    stored = [client.get(f"/v1/calculations/{body['id']}", headers=acme.headers()).text for body in reversed(made)]
    assert response.text == '{"object":"list","data":[' + ",".join(stored) + '],"has_more":false}'


@pytest.mark.on_both
def test_pages_follow_starting_after_until_has_more_is_false(client, acme, clock):
    made = make_calculations(client, acme, clock, 5)
    clock[0] -= dt.timedelta(minutes=2)  # two made in the same millisecond: the id breaks the tie
    made += make_calculations(client, acme, clock, 1, mode="ROAD")
    expected = [body["id"] for body in sorted(made, key=lambda body: (body["created_at"], body["id"]), reverse=True)]
    seen, query = [], "limit=2"
    while True:
        page = listed(client, acme, query)
        seen += ids(page)
        if not page.json["has_more"]:
            break
        query = f"limit=2&starting_after={ids(page)[-1]}"
    assert seen == expected
    assert len(ids(listed(client, acme, "limit=1"))) == 1
    assert len(ids(listed(client, acme))) == 6  # the default limit, 20, holds them all


@pytest.mark.on_both
def test_each_filter_keeps_only_matching_calculations(client, acme, clock, secret):
    make_factor("sea-default", mode="SEA", value="0.0161")
    other = make_customer(acme.org, "cust-2")
    road = make_calculations(client, acme, clock, 2, activity_date="2026-09-10")
    sea = make_calculations(client, acme, clock, 1, mode="SEA", factor_reference="sea-default",
                            activity_date="2026-10-05", customer_reference=other.reference)
    clock[0] = dt.datetime(2026, 10, 3, 12, 0, tzinfo=UTC)
    late = make_calculations(client, acme, clock, 1, activity_date="2026-10-31")

    def found(query: str) -> set[str]:
        return set(ids(listed(client, acme, query)))

    every = {body["id"] for body in road + sea + late}
    assert found("") == every
    assert found("customer_reference=cust-2") == {sea[0]["id"]}
    assert found("customer_reference=nobody") == set()
    assert found("external_reference=shipment-1") == {road[1]["id"]}
    assert found("mode=SEA") == {sea[0]["id"]}
    assert found("activity_from=2026-10-01") == {sea[0]["id"], late[0]["id"]}
    assert found("activity_to=2026-10-05") == {body["id"] for body in road + sea}
    assert found("activity_from=2026-10-05&activity_to=2026-10-05") == {sea[0]["id"]}
    assert found("created_from=2026-10-02") == {late[0]["id"]}
    assert found("created_to=2026-10-01") == {body["id"] for body in road + sea}
    assert found("created_from=2026-10-03&created_to=2026-10-03") == {late[0]["id"]}
    assert found("customer_reference=cust-1&activity_from=2026-10-01") == {late[0]["id"]}


@pytest.mark.on_both
def test_the_list_is_isolated_by_organization_and_environment(client, acme, globex, clock, secret):
    mine = make_calculations(client, acme, clock, 1)
    theirs = post_calculation(client, globex, "theirs", status=201).json["id"]
    live = {"Authorization": "Bearer " + make_key(acme.org, secret, environment="live")}
    make_customer(acme.org, environment="live")
    live_one = client.post_json("/v1/emissions/logistics", logistics_body(), status=201,
                                headers={**live, "Idempotency-Key": "live-1"}).json["id"]
    assert ids(listed(client, acme)) == [mine[0]["id"]]
    assert ids(listed(client, globex)) == [theirs]
    assert ids(client.get("/v1/calculations", headers=live, status=200)) == [live_one]


@pytest.mark.on_both
def test_starting_after_an_unknown_or_another_tenants_id_is_the_same_400(client, acme, globex, clock):
    theirs = post_calculation(client, globex, "theirs", status=201).json["id"]
    unknown = listed(client, acme, "starting_after=00000000-0000-4000-8000-000000000000", status=400)
    other = listed(client, acme, f"starting_after={theirs}", status=400)
    for response in (unknown, other):
        error = response.json["error"]
        assert error["code"] == "INVALID_REQUEST"
        assert error["details"] == [{"field": "starting_after", "message": "names no calculation"}]
    assert unknown.json["error"]["message"] == other.json["error"]["message"]
    assert listed(client, acme, "starting_after=not-an-id", status=400).json["error"]["details"] == [
        {"field": "starting_after", "message": "must be the id of a calculation"}]


@pytest.mark.parametrize("scopes, status", [
    (["emissions:read"], 200), (["emissions:calculate"], 200), (["customers:read", "customer-analytics:read"], 403)])
def test_the_list_needs_a_calculation_read_scope(client, acme, secret, scopes, status):
    key = make_key(acme.org, secret, scopes=scopes)
    response = client.get("/v1/calculations", headers={"Authorization": f"Bearer {key}"}, status=status)
    if status == 403:
        assert response.json["error"]["code"] == "INSUFFICIENT_SCOPE"


# --- every filter on an index ----------------------------------------------------------------------

PLANNED = {
    "no filter": {},
    "customer": {"customer_reference": "cust-1"},
    "activity date": {"activity_from": dt.date(2026, 9, 1), "activity_to": dt.date(2026, 9, 30)},
    "created": {"created_from": dt.date(2026, 9, 1), "created_to": dt.date(2026, 9, 30)},
    "external reference": {"external_reference": "shipment-1"},
    "mode": {"mode": "SEA"},
}


SHIPMENTS_PLANNED = {name: filters for name, filters in PLANNED.items() if "mode" not in filters}


@pytest.mark.parametrize("table, name", [*((listing.CALCULATION, name) for name in PLANNED),
                                         *((listing.SHIPMENT, name) for name in SHIPMENTS_PLANNED)])
@pytest.mark.parametrize("cursor", [None, ("2026-09-15 10:00:00.000000", "00000000-0000-4000-8000-000000000000")])
def test_sqlite_reads_each_filter_through_an_index_in_the_lists_order(app, acme, table, name, cursor):
    text, params = listing.page_statement(acme.org.id, "test", PLANNED[name], cursor, table)
    plan = [row[-1] for row in models.db.execute_sql("EXPLAIN QUERY PLAN " + text, params).fetchall()]
    reading = [step for step in plan if f"{table} " in step]
    assert reading and all(step.startswith(f"SEARCH {table} USING INDEX") for step in reading), plan
    assert not [step for step in plan if step.startswith("SCAN") or "TEMP B-TREE" in step], plan
    if cursor is not None and name != "created":
        assert "(created_at,id)<(?,?)" in reading[0], plan  # the page starts where the index seeks, not after a walk


@pytest.mark.on_both
@pytest.mark.parametrize("path", ["/v1/calculations", "/v1/shipments"])
def test_the_last_and_first_days_a_date_can_name_are_answered(client, acme, clock, path):
    made = make_calculations(client, acme, clock, 1) if path == "/v1/calculations" else []
    for query in ("created_to=9999-12-31", "created_from=0001-01-01&created_to=9999-12-31",
                  "activity_from=0001-01-01&activity_to=9999-12-31"):
        response = client.get(f"{path}?{query}", headers=acme.headers())
        assert [item["id"] for item in response.json["data"]] == [body["id"] for body in made]
