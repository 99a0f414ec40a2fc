"""The customer operations (spec 4.3, 4.4) and their analytics (decisions, section 4)."""
from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal

import pytest
import requests

from emissions import analytics as customer_analytics
from emissions import jsoncodec
from emissions import schemas
from emissions import store
from conftest import (LiveServer, auth_headers, logistics_body, make_customer, make_factor, make_key, make_org,
                      post_calculation, raw_exchange)
from emissions.db import db
from emissions.models import Calculation, CustomerRollup

EMPTY_ANALYTICS = {
    "environment": "test",
    "calculation_count": 0,
    "activity": {"value": 0, "unit": "tkm"},
    "emissions": {"value": 0, "unit": "kgCO2e", "breakdown": {"ttw": 0, "wtt": 0, "unattributed": 0}},
    "by_mode": {},
    "by_business_context": {},
    "first_activity_date": None,
    "last_activity_date": None,
    "period": {"from": None, "to": None},
    "by_month": [],
}


def breakdown_sums(bodies: list[dict]) -> dict:
    """The analytics breakdown of these calculation bodies: parts where they have them, the rest unattributed."""
    parts = [b["emissions"]["breakdown"] for b in bodies if "breakdown" in b["emissions"]]
    return {"ttw": sum(p["ttw"] for p in parts), "wtt": sum(p["wtt"] for p in parts),
            "unattributed": sum(b["emissions"]["value"] for b in bodies if "breakdown" not in b["emissions"])}


def get_customer(client, key: str, reference: str, emissions: bool = False, status="*"):
    path = f"/v1/customers/{reference}" + ("/emissions" if emissions else "")
    return client.get(path, headers=auth_headers(key), status=status)


def exact(response) -> dict:
    """The body parsed with every number as a Decimal, so sums compare exactly."""
    return jsoncodec.loads(response.body)


def assert_valid_customer(body: dict) -> None:
    errors = [error.message for error in schemas.validator("Customer").iter_errors(body)]
    assert errors == []


PATH_CUSTOMER_NOT_FOUND = {
    "code": "CUSTOMER_NOT_FOUND",
    "message": "No customer with this customerReference exists in this environment: create it with "
               "`emissions customer create` or in the workspace.",
    "details": [{"field": "customerReference", "message": "names no customer"}]}


def not_found_body(response) -> dict:
    error = dict(response.json["error"])
    assert error.pop("request_id") == response.headers["X-Request-Id"]
    return error


def stored_sums(customer_id: int) -> tuple[int, Decimal, Decimal]:
    """Count and sums of the stored, rounded calculation values, read row by row."""
    rows = list(Calculation.select().where(Calculation.customer == customer_id))
    return len(rows), sum((row.activity_tkm for row in rows), Decimal(0)), sum((row.emissions_kg for row in rows),
                                                                                 Decimal(0))


# --- GET /v1/customers/{ref} -----------------------------------------------------------------------

@pytest.mark.on_both
def test_get_customer_returns_customer_safe_metadata_with_null_analytics(client, acme):
    make_customer(acme.org, "acct-42", name="Northwind Ltd", country_code="GB")
    response = get_customer(client, acme.key, "acct-42", status=200)
    assert response.json == {"reference": "acct-42", "name": "Northwind Ltd", "status": "active",
                             "country_code": "GB", "analytics": None}
    assert_valid_customer(response.json)
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["X-Request-Id"]


@pytest.mark.parametrize("status", ["suspended", "archived"])
@pytest.mark.parametrize("emissions", [False, True])
def test_suspended_and_archived_customers_are_still_readable(client, acme, status, emissions):
    make_customer(acme.org, "old-1", status=status)
    response = get_customer(client, acme.key, "old-1", emissions=emissions, status=200)
    assert response.json["status"] == status
    assert (response.json["analytics"] is not None) is emissions


def test_analytics_of_a_suspended_customer_keep_its_earlier_calculations(client, acme):
    post_calculation(client, acme, "k1", status=201)
    acme.customer.status = "suspended"
    acme.customer.save()
    post_calculation(client, acme, "k2", status=403)
    analytics = get_customer(client, acme.key, "cust-1", emissions=True, status=200).json["analytics"]
    assert analytics["calculation_count"] == 1


@pytest.mark.parametrize("reference", [
    "acct:eu/42",
    "a.b_c-d",
    "X",
    "9" * 120,
])
@pytest.mark.parametrize("emissions", [False, True])
def test_references_with_every_allowed_character_and_full_length_are_readable(client, acme, reference, emissions):
    make_customer(acme.org, reference)
    response = get_customer(client, acme.key, reference, emissions=emissions, status=200)
    assert response.json["reference"] == reference


@pytest.mark.parametrize("path_reference, stored_reference", [
    ("-leading-dash", "-leading-dash"),
    ("_leading", "_leading"),
    (".hidden", ".hidden"),
    ("a%20b", "a b"),
    ("a*b", "a*b"),
    ("caf%C3%A9", "café"),
    ("a" * 121, "a" * 121),
    ("%2Fslash-first", "/slash-first"),
])
@pytest.mark.parametrize("emissions", [False, True])
def test_a_reference_breaking_the_pattern_or_length_is_customer_not_found(client, acme, path_reference,
                                                                          stored_reference, emissions):
    # Even a stored customer with such a reference is not served: the path rule comes first.
    make_customer(acme.org, stored_reference)
    response = get_customer(client, acme.key, path_reference, emissions=emissions, status=404)
    assert not_found_body(response) == PATH_CUSTOMER_NOT_FOUND


# Sent as raw bytes to the real server: Bottle decodes a path as UTF-8 dropping invalid bytes, and its
# route patterns end in `$`, which also matches before a final newline; neither may make a path that
# breaks the pattern an alias of a valid reference.
@pytest.mark.parametrize("raw_path, stored_reference", [
    (b"/v1/customers/acct%FF-42", "acct-42"),
    (b"/v1/customers/acct-42%FF", "acct-42"),
    (b"/v1/customers/acct-42%0A", "acct-42"),
    (b"/v1/customers/acct-42%0A/emissions", "acct-42"),
    (b"/v1/customers/acct-42/emissions%0A", "acct-42"),
    (b"/v1/customers/acct%0A42", "acct\n42"),
    (b"/v1/customers/acct%0A42/emissions", "acct\n42"),
], ids=["invalid byte inside", "invalid byte at the end", "final newline", "newline before /emissions",
        "newline after /emissions", "newline inside", "newline inside, emissions"])
def test_a_path_with_invalid_utf8_or_a_control_character_is_customer_not_found(live_server, acme, raw_path,
                                                                                stored_reference):
    make_customer(acme.org, stored_reference)
    status, _, body = raw_exchange(live_server, b"GET " + raw_path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                                b"Authorization: Bearer " + acme.key.encode() + b"\r\n\r\n")
    assert status == 404, body
    assert jsoncodec.loads(body)["error"]["code"] == "CUSTOMER_NOT_FOUND"


@pytest.mark.on_both
@pytest.mark.parametrize("emissions", [False, True])
def test_another_organizations_customer_is_the_same_404_as_one_that_never_existed(client, acme, globex, emissions):
    make_customer(globex.org, "globex-only")
    foreign = get_customer(client, acme.key, "globex-only", emissions=emissions, status=404)
    never = get_customer(client, acme.key, "never-existed", emissions=emissions, status=404)
    assert not_found_body(foreign) == not_found_body(never)
    assert foreign.json["error"]["code"] == "CUSTOMER_NOT_FOUND"
    assert dict(foreign.headers, **{"X-Request-Id": ""}) == dict(never.headers, **{"X-Request-Id": ""})
    # The owner does see it.
    get_customer(client, globex.key, "globex-only", emissions=emissions, status=200)


@pytest.mark.on_both
@pytest.mark.parametrize("emissions", [False, True])
def test_a_customer_of_the_other_environment_is_invisible(client, acme, secret, emissions):
    make_customer(acme.org, "live-only", environment="live")
    live_key = make_key(acme.org, secret, environment="live")
    hidden = get_customer(client, acme.key, "live-only", emissions=emissions, status=404)
    never = get_customer(client, acme.key, "never-existed", emissions=emissions, status=404)
    assert not_found_body(hidden) == not_found_body(never)
    assert get_customer(client, live_key, "live-only", emissions=emissions, status=200).json["reference"] == "live-only"
    get_customer(client, live_key, "cust-1", emissions=emissions, status=404)  # cust-1 lives in test


# --- scopes ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("scopes, customer_status, emissions_status", [
    (["customers:read"], 200, 403),
    (["customer-analytics:read"], 403, 403),
    (["customers:read", "customer-analytics:read"], 200, 200),
    (["emissions:read", "emissions:calculate"], 403, 403),
])
def test_customer_operations_require_their_scopes(client, acme, secret, scopes, customer_status, emissions_status):
    key = make_key(acme.org, secret, scopes=scopes)
    response = get_customer(client, key, "cust-1", status=customer_status)
    if customer_status == 403:
        assert response.json["error"]["code"] == "INSUFFICIENT_SCOPE"
    response = get_customer(client, key, "cust-1", emissions=True, status=emissions_status)
    if emissions_status == 403:
        assert response.json["error"]["code"] == "INSUFFICIENT_SCOPE"
        assert "customer" in response.json["error"]["message"]


def test_a_missing_scope_is_reported_before_a_missing_customer(client, acme, secret):
    key = make_key(acme.org, secret, scopes=["emissions:read"])
    for emissions in (False, True):
        response = get_customer(client, key, "never-existed", emissions=emissions, status=403)
        assert response.json["error"]["code"] == "INSUFFICIENT_SCOPE"


def test_customer_operations_need_a_valid_key(client, acme):
    for emissions in (False, True):
        response = get_customer(client, "service_test_" + "x" * 40, "cust-1", emissions=emissions, status=401)
        assert response.json["error"]["code"] == "INVALID_API_KEY"


# --- analytics ---------------------------------------------------------------------------------

@pytest.mark.on_both
def test_a_customer_without_calculations_has_zero_analytics_and_null_dates(client, acme):
    response = get_customer(client, acme.key, "cust-1", emissions=True, status=200)
    assert response.json == {"reference": "cust-1", "name": "Customer cust-1", "status": "active",
                             "country_code": None, "analytics": EMPTY_ANALYTICS}
    assert_valid_customer(response.json)


@pytest.mark.on_both
def test_analytics_sum_the_stored_rounded_values_by_mode_and_context(client, acme):
    make_factor("sea-default", mode="SEA", value="0.0161")
    posts = [  # (mode, context, cargo, distance, date); values chosen so every result is rounded
        ("ROAD", "upstream", 1.234567, 0.5, "2026-03-02"),
        ("ROAD", "downstream", 12.5, 320, "2026-01-15"),
        ("SEA", "downstream", 3333.3333, 7777.7, "2026-04-30"),
        ("ROAD", "upstream", 0.000009, 0.5, "2026-02-01"),  # 0.0000045 tkm: a tie, to even 0.000004
    ]
    bodies = []
    for number, (mode, context, cargo, distance, date) in enumerate(posts):
        response = post_calculation(
            client, acme, f"k{number}", status=201, mode=mode, business_context=context,
            cargo={"value": cargo, "unit": "tonne"}, distance={"value": distance, "unit": "km"},
            activity_date=date, external_reference=f"s{number}",
            factor_reference="sea-default" if mode == "SEA" else "road-default")
        bodies.append(exact(response))
    response = get_customer(client, acme.key, "cust-1", emissions=True, status=200)
    assert_valid_customer(response.json)

    def aggregate(selected):
        return {"calculation_count": len(selected),
                "activity": {"value": sum(b["activity"]["value"] for b in selected), "unit": "tkm"},
                "emissions": {"value": sum(b["emissions"]["value"] for b in selected), "unit": "kgCO2e",
                              "breakdown": breakdown_sums(selected)}}

    road = [b for b in bodies if b["mode"] == "ROAD"]
    sea = [b for b in bodies if b["mode"] == "SEA"]
    upstream = [b for b in bodies if b["methodology"]["business_context"] == "upstream"]
    downstream = [b for b in bodies if b["methodology"]["business_context"] == "downstream"]
    assert exact(response)["analytics"] == {
        "environment": "test",
        **aggregate(bodies),
        "by_mode": {"ROAD": aggregate(road), "SEA": aggregate(sea)},
        "by_business_context": {"upstream": aggregate(upstream), "downstream": aggregate(downstream)},
        "first_activity_date": "2026-01-15",
        "last_activity_date": "2026-04-30",
        "period": {"from": None, "to": None},
        "by_month": [{"month": month, **aggregate([b for b in bodies if b["activity_date"].startswith(month)])}
                     for month in ("2026-01", "2026-02", "2026-03", "2026-04")],
    }
    # The rounding really happened, and the totals are exactly the stored values' sums.
    assert bodies[0]["activity"]["value"] == Decimal("0.617284")
    assert (bodies[3]["activity"]["value"], bodies[3]["emissions"]["value"]) == (Decimal("0.000004"),
                                                                                Decimal("0.000001"))
    count, activity, emissions = stored_sums(acme.customer.id)
    analytics = exact(response)["analytics"]
    assert (analytics["calculation_count"], analytics["activity"]["value"], analytics["emissions"]["value"]) == (
        count, activity, emissions)


def test_only_modes_and_contexts_with_data_appear(client, acme):
    post_calculation(client, acme, "k1", status=201)
    analytics = get_customer(client, acme.key, "cust-1", emissions=True, status=200).json["analytics"]
    assert list(analytics["by_mode"]) == ["ROAD"]
    assert list(analytics["by_business_context"]) == ["upstream"]
    assert analytics["first_activity_date"] == analytics["last_activity_date"] == "2026-03-01"


@pytest.mark.on_both
def test_a_replay_adds_nothing_and_a_failed_calculation_adds_nothing(client, acme):
    post_calculation(client, acme, "k1", status=201)
    post_calculation(client, acme, "k1", status=200)
    post_calculation(client, acme, "k1", status=409, cargo={"value": 1, "unit": "tonne"})
    post_calculation(client, acme, "k2", status=422, mode="SEA")  # the road factor does not apply to SEA
    analytics = get_customer(client, acme.key, "cust-1", emissions=True, status=200).json["analytics"]
    assert analytics["calculation_count"] == 1
    assert analytics["emissions"] == {"value": 500.88, "unit": "kgCO2e",
                                      "breakdown": {"ttw": 0, "wtt": 0, "unattributed": 500.88}}


@pytest.mark.on_both
def test_test_and_live_analytics_are_isolated(client, acme, secret):
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, "cust-1", environment="live")
    post_calculation(client, acme, "k1", status=201)
    post_calculation(client, acme, "k2", status=201, external_reference="shipment-2")
    client.post_json("/v1/emissions/logistics", logistics_body(cargo={"value": 1, "unit": "tonne"}),
                     headers=auth_headers(live_key, "k1"), status=201)

    test = get_customer(client, acme.key, "cust-1", emissions=True, status=200).json["analytics"]
    live = get_customer(client, live_key, "cust-1", emissions=True, status=200).json["analytics"]
    assert (test["environment"], test["calculation_count"], test["activity"]["value"]) == ("test", 2, 8000)
    assert (live["environment"], live["calculation_count"], live["activity"]["value"]) == ("live", 1, 320)


def test_another_organizations_calculations_never_reach_the_analytics(client, acme, globex):
    post_calculation(client, globex, "k1", status=201)
    analytics = get_customer(client, acme.key, "cust-1", emissions=True, status=200).json["analytics"]
    assert analytics == EMPTY_ANALYTICS


def test_the_analytics_read_costs_one_lookup_of_at_most_six_rollup_rows(client, acme):
    make_factor("sea-default", mode="SEA", value="0.0161")
    make_factor("air-default", mode="AIR", value="1.1")
    for number in range(12):
        mode = ("ROAD", "SEA", "AIR")[number % 3]
        post_calculation(client, acme, f"k{number}", status=201, mode=mode, external_reference=f"s{number}",
                         business_context=("upstream", "downstream")[number % 2],
                         factor_reference=f"{mode.lower()}-default")
    rows = CustomerRollup.select().where(CustomerRollup.customer == acme.customer.id).count()
    assert rows == 6
    analytics = get_customer(client, acme.key, "cust-1", emissions=True, status=200).json["analytics"]
    assert analytics["calculation_count"] == 12
    assert {mode: a["calculation_count"] for mode, a in analytics["by_mode"].items()} == {
        "ROAD": 4, "SEA": 4, "AIR": 4}


def test_sums_beyond_twenty_eight_digits_stay_exact():
    day = dt.date(2026, 1, 1)
    row = CustomerRollup(mode="ROAD", business_context="upstream", calculation_count=1,
                         activity_tkm=Decimal("9999999999999.999999"),
                         emissions_kg=Decimal("1234567890123456789012345.123457"),
                         first_activity_date=day, last_activity_date=day)
    summary = customer_analytics.summarize("test", [row] * 3)
    assert summary["emissions"]["value"] == Decimal("3703703670370370367037035.370371")
    assert summary["activity"]["value"] == Decimal("29999999999999.999997")
    assert summary["calculation_count"] == 3
    big = Decimal("1" * 40 + ".000001")
    assert customer_analytics.EXACT.add(big, big) == Decimal("2" * 40 + ".000002")


# --- concurrent writers ------------------------------------------------------------------------

def post_many(url: str, key: str, keys: list[str], failures: list) -> None:
    """POST one calculation per idempotency key, replaying each once; record anything unexpected."""
    with requests.Session() as session:
        for number, idempotency_key in enumerate(keys):
            body = logistics_body(external_reference=idempotency_key,  # results that need rounding
                                  cargo={"value": round(1 + number * 0.1234567, 7), "unit": "tonne"},
                                  distance={"value": 7.3, "unit": "km"},
                                  business_context=("upstream", "downstream")[number % 2])
            for expected in (201, 200):
                response = session.post(f"{url}/v1/emissions/logistics", json=body,
                                        headers=auth_headers(key, idempotency_key), timeout=60)
                if response.status_code != expected:
                    failures.append((idempotency_key, response.status_code, response.text))


def start_writers(url: str, key: str, writers: int, per_writer: int, failures: list) -> list[threading.Thread]:
    """Threads already POSTing (and replaying) calculations with keys of their own, through post_many."""
    threads = [threading.Thread(target=post_many,
                                args=(url, key, [f"t{t}-k{n}" for n in range(per_writer)], failures))
               for t in range(writers)]
    for thread in threads:
        thread.start()
    return threads


@pytest.mark.on_both
def test_totals_equal_the_stored_calculations_under_concurrent_writers(app, acme):
    threads_count, per_thread = 6, 6
    failures: list = []
    with LiveServer(app, threads=8) as server:
        threads = start_writers(server.url, acme.key, threads_count, per_thread, failures)
        for thread in threads:
            thread.join()
        response = requests.get(f"{server.url}/v1/customers/cust-1/emissions", headers=auth_headers(acme.key),
                                timeout=30)
    assert failures == []
    analytics = jsoncodec.loads(response.content)["analytics"]
    count, activity, emissions = stored_sums(acme.customer.id)
    assert count == threads_count * per_thread
    assert (analytics["calculation_count"], analytics["activity"]["value"], analytics["emissions"]["value"]) == (
        count, activity, emissions)
    by_context = analytics["by_business_context"]
    assert by_context["upstream"]["calculation_count"] + by_context["downstream"]["calculation_count"] == count
    assert customer_analytics.verify().drifted == []


@pytest.mark.on_both
def test_a_rebuild_beside_concurrent_writers_loses_no_calculation(app, acme):
    failures: list = []
    with LiveServer(app, threads=8) as server:
        threads = start_writers(server.url, acme.key, 4, 5, failures)
        rebuilds = 0
        while any(thread.is_alive() for thread in threads) or rebuilds < 2:
            # Damage the rollup, then repair it while calculations keep arriving.
            CustomerRollup.update(calculation_count=0).execute()
            customer_analytics.rebuild()
            rebuilds += 1
        for thread in threads:
            thread.join()
    assert failures == []
    assert customer_analytics.verify().drifted == []
    count, _, _ = stored_sums(acme.customer.id)
    assert count == 20
    assert customer_analytics.find_with_analytics(acme.org.id, "test", "cust-1")["analytics"]["calculation_count"] == 20


@pytest.mark.on_both
def test_concurrent_rollup_writes_lose_no_update(acme):
    # The rollup write on its own, without the rest of the calculation's transaction to queue on.
    amounts = [Decimal(f"{number}.{number:06d}") for number in range(1, 31)]
    days = [dt.date(2026, 1, 1) + dt.timedelta(days=number) for number in range(len(amounts))]
    errors: list = []

    def add(indexes):
        try:
            for index in indexes:
                with db.atomic():
                    # Every other calculation has parts (ttw = 3/2 x amount, wtt = 1/2 x amount).
                    parts = (amounts[index] * 3 / 2, amounts[index] / 2) if index % 2 else None
                    store.run(*store.add_to_rollup(acme.customer.id, "test", "ROAD", "upstream",
                                                   amounts[index], amounts[index] * 2, days[index], parts))
        except Exception as exc:  # reported below, with the thread's failure
            errors.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=add, args=(range(start, len(amounts), 6),)) for start in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    row = CustomerRollup.get(CustomerRollup.customer == acme.customer.id)
    assert (row.calculation_count, row.activity_tkm, row.emissions_kg) == (30, sum(amounts), 2 * sum(amounts))
    assert (row.first_activity_date, row.last_activity_date) == (days[0], days[-1])
    with_parts = sum(amounts[1::2])
    assert (row.emissions_ttw_kg, row.emissions_wtt_kg) == (with_parts * 3 / 2, with_parts / 2)


@pytest.mark.on_both
def test_verify_beside_concurrent_writers_reports_no_false_drift(app, acme):
    failures: list = []
    with LiveServer(app, threads=8) as server:
        threads = start_writers(server.url, acme.key, 4, 5, failures)
        reports = []
        while any(thread.is_alive() for thread in threads) or not reports:
            # Each customer is checked in one snapshot: a calculation committed between reading
            # the rollup and reading the calculations must not look like drift.
            reports.append(customer_analytics.verify().drifted)
        for thread in threads:
            thread.join()
    assert failures == []
    assert all(drifted == [] for drifted in reports)
    assert customer_analytics.verify().calculations == 20


def test_an_empty_customer_reference_is_customer_not_found_after_authentication(client, acme):
    assert client.get("/v1/customers/", status=401).json["error"]["code"] == "INVALID_API_KEY"
    response = client.get("/v1/customers/", headers=acme.headers(), status=404)
    assert response.json["error"]["code"] == "CUSTOMER_NOT_FOUND"


@pytest.mark.on_both
def test_the_analytics_answer_follows_every_change_of_its_rows(client, acme):
    def analytics() -> dict:
        return jsoncodec.loads(client.get("/v1/customers/cust-1/emissions", headers=acme.headers(), status=200).body)

    first = analytics()
    lifetime = {name: value for name, value in first["analytics"].items() if name not in ("period", "by_month")}
    assert analytics() == first
    assert {**first, "analytics": lifetime} == customer_analytics.find_with_analytics(acme.org.id, "test", "cust-1")
    post_calculation(client, acme, "answer-1", status=201)
    assert analytics()["analytics"]["calculation_count"] == first["analytics"]["calculation_count"] + 1
    acme.customer.name, acme.customer.status = "Acme Renamed Ltd", "suspended"  # as the CLI or workspace would
    acme.customer.save()
    renamed = analytics()
    assert (renamed["name"], renamed["status"]) == ("Acme Renamed Ltd", "suspended")
    CustomerRollup.delete().execute()  # as if a rebuild found nothing
    assert analytics()["analytics"]["calculation_count"] == 0
