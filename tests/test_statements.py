"""The customer statement: API and CLI agree with the period analytics and with the period's calculations."""
from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest

from emissions import jsoncodec
from conftest import make_customer, make_key, post_calculation
from helpers import check_response, expected_analytics

OCTOBER = "from=2026-10-01&to=2026-10-31"


def statement(client, persona, query: str = OCTOBER, status: int = 200):
    return client.get(f"/v1/customers/cust-1/statement?{query}", headers=persona.headers(), status=status)


@pytest.mark.on_both
def test_the_statement_holds_the_period_analytics_factors_and_method(client, acme, shipped):
    response = statement(client, acme)
    check_response(response, "/customers/{customerReference}/statement", "get")
    found = jsoncodec.loads(response.body)
    expected = expected_analytics(shipped, "2026-10-01", "2026-10-31")
    assert found["customer"] == {"reference": "cust-1", "name": "Customer cust-1", "country_code": None}
    assert found["period"] == {"from": "2026-10-01", "to": "2026-10-31"}
    totals = found.pop("totals")
    assert {name: totals[name] for name in ("calculation_count", "activity", "emissions")} == {
        name: expected[name] for name in ("calculation_count", "activity", "emissions")}
    assert totals["intensity"] == {"value": (expected["emissions"]["value"] / expected["activity"]["value"]).quantize(
        Decimal("0.000001")), "unit": "kgCO2e/tkm"}
    assert {mode: {k: v for k, v in t.items() if k != "intensity"} for mode, t in found["by_mode"].items()} == \
        expected["by_mode"]
    assert found["by_month"] == expected["by_month"]
    october = [b for b in shipped if b["activity_date"].startswith("2026-10")]
    assert [(f["reference"], f["version"], f["calculation_count"]) for f in found["factors"]] == sorted(
        {(b["factor"]["reference"], b["factor"]["version"], sum(1 for o in october if o["factor"] == b["factor"]))
         for b in october})
    assert found["methodology"]["standard"] == "ISO 14083:2023" and found["methodology"]["boundary"] == "WTW"
    assert found["generated_at"].endswith("Z")


def test_the_statement_is_refused_like_the_analytics(client, acme, globex, secret):
    assert statement(client, acme, "from=2026-10-31&to=2026-10-01", status=400).json["error"]["details"] == [
        {"field": "from", "message": "must not be after to"}]
    assert statement(client, acme, "period=2026-10", status=400).json["error"]["code"] == "INVALID_REQUEST"
    assert client.get("/v1/customers/nobody/statement", headers=acme.headers(), status=404).json["error"][
        "code"] == "CUSTOMER_NOT_FOUND"
    make_customer(globex.org, "only-globex")
    assert client.get("/v1/customers/only-globex/statement", headers=acme.headers(), status=404)
    reader = make_key(acme.org, secret, scopes=["customers:read"])
    assert client.get("/v1/customers/cust-1/statement", headers={"Authorization": f"Bearer {reader}"},
                      status=403).json["error"]["code"] == "INSUFFICIENT_SCOPE"


def test_the_cli_statement_is_the_apis_and_its_csv_lists_the_periods_calculations(client, acme, shipped, emissions,
                                                                                 tmp_path):
    status, out, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                 "--from", "2026-10-01", "--to", "2026-10-31")
    assert (status, err) == (0, "")
    from_cli, from_api = jsoncodec.loads(out), jsoncodec.loads(statement(client, acme).body)
    from_cli.pop("generated_at"), from_api.pop("generated_at")
    assert from_cli == from_api

    path = tmp_path / "october.csv"
    status, out, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                 "--from", "2026-10-01", "--to", "2026-10-31", "--format", "csv",
                                 "--output", path, "--json")
    assert status == 0 and json.loads(out)["calculation_count"] == 4
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    october = [b for b in shipped if b["activity_date"].startswith("2026-10")]
    assert sorted(row["calculation_id"] for row in rows) == sorted(b["id"] for b in october)
    assert sum(Decimal(row["emissions_kgco2e"]) for row in rows) == from_api["totals"]["emissions"]["value"]
    assert sum(Decimal(row["activity_tkm"]) for row in rows) == from_api["totals"]["activity"]["value"]
    air = next(row for row in rows if row["mode"] == "AIR")
    assert Decimal(air["emissions_ttw_kgco2e"]) + Decimal(air["emissions_wtt_kgco2e"]) == Decimal(air["emissions_kgco2e"])
    assert air["factor_reference"] == "air-parts" and air["factor_source"]

    status, out, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                 "--from", "2026-10-01", "--to", "2026-10-31", "--format", "html")
    assert status == 0 and "<h1>Emissions statement: <bdi>Customer cust-1</bdi> (<bdi>cust-1</bdi>)</h1>" in out and "ISO 14083:2023" in out


def test_the_cli_statement_refuses_what_it_cannot_answer(acme, fails):
    assert "no customer nobody" in fails("statement", "--org", "acme", "--env", "test", "--customer", "nobody")
    assert "is after" in fails("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--from", "2026-10-02", "--to", "2026-10-01")
    assert "not a date" in fails("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                 "--from", "October")


def test_the_statement_csv_quotes_a_cell_a_spreadsheet_would_run(client, acme, emissions, tmp_path):
    post_calculation(client, acme, "formula", status=201, external_reference="=HYPERLINK(\"http://x\")",
                     activity_date="2026-10-05")
    path = tmp_path / "october.csv"
    status, _, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--from", "2026-10-01", "--to", "2026-10-31", "--format", "csv", "--output", path)
    assert (status, err) == (0, "")
    [row] = list(csv.DictReader(io.StringIO(path.read_text())))
    assert row["external_reference"] == "'=HYPERLINK(\"http://x\")"
    assert Decimal(row["emissions_kgco2e"]) > 0 and row["emissions_kgco2e"][0].isdigit()  # numbers stay numbers
