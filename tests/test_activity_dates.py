"""Activity dates (issue 38): accepted from 2000-01-01 to one year after today on every way in, months
written with four-digit years, and pages that survive any date a database already holds."""
from __future__ import annotations

import datetime as dt
import re

import pytest

from emissions import bounds
from emissions import workspace
from emissions.models import Calculation, Shipment
from conftest import PASSWORD, logistics_body, make_factor, post_calculation
from helpers import sign_in

TODAY = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc)


def shipment_body(**overrides) -> dict:
    body = {"customer_reference": "cust-1", "external_reference": "PO-1", "activity_date": "2026-03-01",
            "cargo": {"value": 10, "unit": "tonne"},
            "elements": [{"type": "leg", "mode": "ROAD", "origin": {"label": "Hull"}, "destination": {"label": "York"},
                          "distance": {"value": 60, "unit": "km"}, "factor_reference": "road-default"}]}
    body.update(overrides)
    return body


@pytest.fixture
def open_factor(acme):
    """The operator's road factor without validity bounds: only the date rule limits the dates."""
    return make_factor("road-open", valid_from=None)


@pytest.mark.parametrize("day, accepted", [
    ("2000-01-01", True), ("1999-12-31", False), ("0999-05-01", False), ("0001-01-01", False),
    ("2027-11-25", True), ("2027-11-26", False), ("9999-12-31", False),
])
@pytest.mark.parametrize("way", ["calculation", "shipment"])
def test_an_activity_date_is_accepted_from_2000_to_one_year_after_today(client, acme, open_factor, fixed_clock,
                                                                       day, accepted, way):
    fixed_clock(TODAY)
    if way == "calculation":
        response = client.post_json("/v1/emissions/logistics", logistics_body(activity_date=day,
                                                                              factor_reference="road-open"),
                                    headers=acme.headers("idem-1"), status="*")
    else:
        body = shipment_body(activity_date=day)
        body["elements"][0]["factor_reference"] = "road-open"
        response = client.post_json("/v1/shipments", body, headers=acme.headers("idem-1"), status="*")
    if accepted:
        assert response.status_int == 201, response.text
    else:
        assert response.status_int == 422, response.text
        assert response.json["error"]["details"] == [{
            "field": "activity_date", "message": "must be from 2000-01-01 to 2027-11-25 (one year after today)"}]
        assert Calculation.select().count() == Shipment.select().count() == 0


def test_one_year_after_the_29th_of_february_is_the_28th(fixed_clock):
    fixed_clock(dt.date(2028, 2, 29))
    assert bounds.last_activity_date() == dt.date(2029, 2, 28)


@pytest.fixture
def stored_far_dates(client, acme, open_factor, fixed_clock, monkeypatch):
    """Calculations dated 9999-12-31, 0999-05-01 and 0001-01-01, stored as before the date rule
    (with it lifted), and a current one."""
    fixed_clock(TODAY)
    with monkeypatch.context() as lifted:
        lifted.setattr(bounds, "details", lambda body: [])
        for number, day in enumerate(["9999-12-31", "0999-05-01", "0001-01-01", "2026-11-02"]):
            post_calculation(client, acme, f"idem-{number}", status=201, activity_date=day,
                             factor_reference="road-open", external_reference=f"far-{number}")
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    return acme


def test_months_have_four_digit_years_in_order(client, stored_far_dates):
    answer = client.get("/v1/customers/cust-1/emissions", headers=stored_far_dates.headers()).json
    assert [month["month"] for month in answer["analytics"]["by_month"]] == [
        "0001-01", "0999-05", "2026-11", "9999-12"]
    statement = client.get("/v1/customers/cust-1/statement", headers=stored_far_dates.headers()).json
    assert [month["month"] for month in statement["by_month"]] == ["0001-01", "0999-05", "2026-11", "9999-12"]


@pytest.mark.parametrize("query", [{}, {"period": "all"}, {"period": "custom", "from": "0001-01-01", "to": "9999-12-31"},
                                   {"period": "custom", "from": "9999-12-01", "to": "9999-12-31"},
                                   {"period": "all", "format": "statement"}, {"period": "all", "format": "csv"}])
def test_the_customer_page_survives_any_stored_date(client, stored_far_dates, query):
    page = client.get("/workspace/customers/cust-1", query)
    assert page.status_int == 200
    if query.get("format") != "csv":
        assert "9999" in page.text or query == {}


def test_every_workspace_page_survives_any_stored_date(client, stored_far_dates):
    for path in ("/workspace", "/workspace?period=all", "/workspace?period=custom&from=9998-06-01&to=9999-12-31",
                 "/workspace?period=custom&from=0001-01-01&to=0001-03-01", "/workspace/calculations",
                 "/workspace/calculations?period=all",
                 "/workspace/calculations.csv", "/workspace/shipments", "/workspace/customers", "/workspace/webhooks",
                 "/workspace/keys", "/workspace/team", "/workspace/audit"):
        assert client.get(path).status_int == 200, path
    months = re.findall(r'data-month="([^"]*)"', client.get("/workspace?period=all").text)
    assert months == sorted(months) and all(re.fullmatch(r"\d{4}-\d{2}", month) for month in months), months
    assert "0999-05" in months and "9999-12" in months
    for calculation in Calculation.select():
        page = client.get(f"/workspace/calculations/{calculation.id}")
        assert re.search(r"\b(9999|0999|0001|2026)\b", page.text), calculation.activity_date


def test_the_cli_statement_survives_any_stored_date(stored_far_dates, emissions, tmp_path):
    for form in ("json", "csv", "html"):
        status, _, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                   "--format", form, "--output", tmp_path / f"statement.{form}")
        assert status == 0, err
    assert "<td><bdi>0999-05</bdi></td>" in (tmp_path / "statement.html").read_text()


@pytest.mark.parametrize("cargo, accepted", [
    ({"value": 1_000_000, "unit": "TEU", "tonnes_per_teu": 10}, True),
    ({"value": 1_000_000, "unit": "TEU"}, True),  # the default 10 tonnes per TEU
    ({"value": 1000000.1, "unit": "TEU"}, False),
    ({"value": 10_000_000, "unit": "TEU", "tonnes_per_teu": 100}, False),
    ({"value": 200_000, "unit": "TEU", "tonnes_per_teu": 50.000001}, False),
])
def test_a_teu_cargo_past_ten_million_tonnes_is_refused_naming_cargo(client, acme, fixed_clock, cargo, accepted):
    fixed_clock(TODAY)
    response = client.post_json("/v1/shipments", shipment_body(cargo=cargo), headers=acme.headers("idem-1"), status="*")
    if accepted:
        assert response.status_int == 201, response.text
    else:
        assert response.status_int == 422, response.text
        assert response.json["error"]["details"] == [{
            "field": "cargo", "message": "must be at most 10,000,000 tonnes (TEU count × tonnes_per_teu)"}]
        assert Shipment.select().count() == 0

