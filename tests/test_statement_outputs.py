"""A statement of a customer with shipments (issue 32): every output (JSON, CSV, the CLI's HTML and the
workspace's printable page) adds up to its own totals, hubs included, counts shipments and single
calculations apart, keeps the legs' place codes, and lists a shipment's legs together in chain order."""
from __future__ import annotations

import csv
import io
import re
from decimal import Decimal

import pytest

from emissions import figures, jsoncodec, workspace
from tests.conftest import PASSWORD, TERMINAL, post_calculation
from helpers import Tables, check_response, sign_in, worked_example

NOVEMBER = ("2026-11-01", "2026-11-30")


def chain(day: str, reference: str) -> dict:
    """An origin warehouse, a truck to Shanghai, a ship to Felixstowe, its terminal, a truck: two hubs, three legs."""
    hub = {"type": "hub", "hub_type": "container_terminal", "factor_reference": TERMINAL}
    return worked_example(external_reference=reference, activity_date=day, elements=[
        {**hub, "location": {"label": "Warehouse, Songjiang"}},
        {"type": "leg", "mode": "ROAD", "origin": {"label": "Warehouse, Songjiang", "country": "CN"},
         "destination": {"locode": "CNSHA", "label": "Shanghai"}, "distance": {"value": 48.5, "unit": "km"}},
        {"type": "leg", "mode": "SEA", "origin": {"locode": "CNSHA", "label": "Shanghai"},
         "destination": {"locode": "GBFXT"}, "distance": {"value": 22398.713, "unit": "km"}},
        {**hub, "location": {"locode": "GBFXT"}},
        {"type": "leg", "mode": "ROAD", "origin": {"locode": "GBFXT"},
         "destination": {"label": "Warehouse, Trafford Park", "country": "GB"},
         "distance": {"value": 372.4, "unit": "km"}}])


@pytest.fixture
def november(client, acme, library):
    """Three shipments (six hubs, nine legs) and two single calculations in November, one in October."""
    shipments = [client.post_json("/v1/shipments", chain(day, f"PO-{number}"), headers=acme.headers(f"ship-{number}"),
                                  status=201).json
                 for number, day in enumerate(("2026-11-03", "2026-11-12", "2026-11-20"))]
    for number, day in enumerate(("2026-11-05", "2026-11-28", "2026-10-30")):
        post_calculation(client, acme, f"single-{number}", status=201, activity_date=day)
    return shipments


def statement_json(client, acme) -> dict:
    response = client.get("/v1/customers/cust-1/statement?from={}&to={}".format(*NOVEMBER), headers=acme.headers())
    check_response(response, "/customers/{customerReference}/statement", "get")
    return jsoncodec.loads(response.body)


def decimal(text: str) -> Decimal:
    return Decimal(text.replace(",", "")) if text else Decimal(0)


def columns(rows: list[list[tuple]], header: list[tuple]) -> list[dict]:
    return [{name: cell for (name, _), cell in zip(header, row)} for row in rows]


@pytest.mark.on_both
def test_every_statement_output_adds_up_to_its_totals_with_the_hubs(client, acme, november, emissions, tmp_path):
    found = statement_json(client, acme)
    totals, hubs = found["totals"], found["hubs"]
    assert hubs["count"] == 6 and hubs["emissions"]["value"] == 6 * 26
    emissions_total = totals["emissions"]["value"]
    # JSON: the modes and the hubs, and the months, each add up to the totals.
    assert sum(mode["emissions"]["value"] for mode in found["by_mode"].values()) + hubs["emissions"]["value"] \
        == emissions_total
    assert sum(month["emissions"]["value"] for month in found["by_month"]) == emissions_total
    analytics = client.get("/v1/customers/cust-1/emissions?from={}&to={}".format(*NOVEMBER),
                           headers=acme.headers())
    assert jsoncodec.loads(analytics.body)["analytics"]["emissions"] == totals["emissions"]

    # CSV: one row per calculation and per hub; its columns add up to the totals.
    path = tmp_path / "november.csv"
    status, _, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--from", NOVEMBER[0], "--to", NOVEMBER[1], "--format", "csv", "--output", path)
    assert (status, err) == (0, "")
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    hub_rows = [row for row in rows if row["mode"] == "HUB"]
    assert len(hub_rows) == 6 and len(rows) - 6 == totals["calculation_count"]
    assert sum(decimal(row["emissions_kgco2e"]) for row in rows) == emissions_total
    assert sum(decimal(row["activity_tkm"]) for row in rows) == totals["activity"]["value"]
    for column, part in (("emissions_ttw_kgco2e", "ttw"), ("emissions_wtt_kgco2e", "wtt")):
        assert sum(decimal(row[column]) for row in rows) == totals["emissions"]["breakdown"][part]
    assert {(row["factor_reference"], row["hub_type"], row["cargo_tonnes"]) for row in hub_rows} == {
        (TERMINAL, "container_terminal", "20")}
    assert {row["origin_code"] for row in hub_rows} == {"", "GBFXT"}

    # The CLI's HTML: the by-mode rows, the hubs' among them, reach the total in every column.
    status, page, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                  "--from", NOVEMBER[0], "--to", NOVEMBER[1], "--format", "html")
    assert (status, err) == (0, "")
    tables = [rows for _, rows in Tables(page).tables]
    total_table, _, mode_table, month_table, factor_table = tables
    # Each table's emissions are written in one unit (here t CO2e, from 30.89 t) rounded to hundredths, and
    # carry their exact kg in data-value, by which they add up.
    assert [name for name, _ in total_table[0][3:]] == ["t CO2e", "TTW t CO2e", "WTT t CO2e", "not split t CO2e"]

    def in_kg(table: list[list[tuple]]) -> list[dict]:
        """The table's rows by column, its emissions headers named in kg and each value exact."""
        header = [(name.replace("t CO2e", "kgCO2e"), value) for name, value in table[0]]
        listed = columns(table[1:], header)
        for row in listed:
            for name in ("kgCO2e", "TTW kgCO2e", "WTT kgCO2e", "not split kgCO2e"):
                text, exact = row[name]
                assert text == figures.TONNES.number(Decimal(exact)), (name, text, exact)
                row[name] = (exact, exact)
        return listed

    [total] = in_kg(total_table)
    for table in (mode_table, month_table):
        listed = in_kg(table)
        for column in ("calculations", "tkm", "kgCO2e", "TTW kgCO2e", "WTT kgCO2e", "not split kgCO2e"):
            assert sum(decimal(row[column][0]) for row in listed) == decimal(total[column][0]), column
        for row in listed + [total]:
            assert sum(decimal(row[part][0]) for part in ("TTW kgCO2e", "WTT kgCO2e", "not split kgCO2e")) == \
                decimal(row["kgCO2e"][0])
    assert [row[""][0] for row in columns(mode_table[1:], mode_table[0])] == [
        "ROAD", "SEA", "Hubs (6, 120.00 t handled)"]
    assert decimal(total["kgCO2e"][0]) == emissions_total
    factors = {row["reference"][0]: row for row in columns(factor_table[1:], factor_table[0])}
    assert (factors[TERMINAL]["calculations"][0], factors[TERMINAL]["hubs"][0]) == ("", "6")
    assert factors["road-default"]["calculations"][0] == "2" and factors["road-default"]["hubs"][0] == ""

    # The workspace's printable statement: the same, by the exact values its cells carry.
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    printable = client.get("/workspace/customers/cust-1", {"from": NOVEMBER[0], "to": NOVEMBER[1],
                                                           "format": "statement"}).text
    # Both pages say the method and its sources in the same words (one partial, statement_method.tpl).
    method = re.compile(r"<p>(ISO 14083:2023, well-to-wheel .*?|Source: .*?)</p>")
    assert method.findall(printable) == method.findall(page) and len(method.findall(page)) >= 2
    tables = dict(Tables(printable).tables)
    modes = tables["statement-modes"][1:]
    assert [row[0][0] for row in modes] == ["Road", "Sea", "Hubs (6, 120.00 t handled)"]
    assert sum(Decimal(row[3][1]) for row in modes) == Decimal(tables["statement-totals"][1][3][1]) \
        == emissions_total
    assert sum(Decimal(row[3][1]) for row in tables["statement-months"][1:]) == emissions_total
    terminal = next(row for row in tables["statement-factors"][1:] if row[0][0] == TERMINAL)
    assert (terminal[4][0], terminal[5][0]) == ("—", "6")


@pytest.mark.on_both
def test_statements_and_the_customer_page_count_shipments_and_single_calculations_apart(client, acme, november,
                                                                                       emissions, tmp_path):
    totals = statement_json(client, acme)["totals"]
    assert (totals["shipment_count"], totals["single_calculation_count"], totals["calculation_count"]) == (3, 2, 11)

    status, out, _ = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--from", NOVEMBER[0], "--to", NOVEMBER[1], "--format", "csv", "--output",
                               tmp_path / "november.csv", "--json")
    assert status == 0 and {name: value for name, value in jsoncodec.loads(out).items() if "count" in name} == {
        "calculation_count": 11, "shipment_count": 3, "single_calculation_count": 2}
    status, page, _ = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                "--from", NOVEMBER[0], "--to", NOVEMBER[1], "--format", "html")
    count_table = Tables(page).tables[1][1]
    assert [cell for cell, _ in count_table[0]] == ["", "shipments", "single calculations", "calculations", "hubs"]
    assert [cell for cell, _ in count_table[1]] == ["Count", "3", "2", "11", "6"]

    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    period = {"from": NOVEMBER[0], "to": NOVEMBER[1]}
    for shown in (client.get("/workspace/customers/cust-1", period).text,
                  client.get("/workspace/customers/cust-1", {**period, "format": "statement"}).text):
        assert re.search(r'data-field="shipment_count"[^>]*>3<', shown)
        assert re.search(r'data-field="single_calculation_count"[^>]*>2<', shown)
    # Lifetime: October's single calculation counts too.
    lifetime = client.get("/workspace/customers/cust-1", {"period": "all"}).text
    assert re.search(r'data-field="single_calculation_count"[^>]*>3<', lifetime)


@pytest.mark.on_both
def test_the_recent_lists_show_a_shipments_legs_together_in_chain_order(client, acme, november):
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    legs = [[element["calculation_id"] for element in shipment["elements"] if element["type"] == "leg"]
            for shipment in november]
    for path in ("/workspace/customers/cust-1", "/workspace"):
        listed = [found for found in re.findall(r'href="/workspace/calculations/([0-9a-f-]{36})"',
                                                client.get(path).text)]
        for shipment_legs in legs:
            if shipment_legs[0] in listed:
                at = listed.index(shipment_legs[0])
                assert listed[at:at + 3] == shipment_legs, path
        # The last shipment a list reaches comes whole, even where the list's size would cut it.
        assert sum(shipment_legs[0] in listed for shipment_legs in legs) == (3 if "customers" in path else 2)


@pytest.mark.on_both
def test_the_statement_csv_groups_leg_rows_by_lane_with_codes_and_countries(client, acme, november, emissions,
                                                                           tmp_path):
    path = tmp_path / "november.csv"
    emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1", "--from", NOVEMBER[0],
              "--to", NOVEMBER[1], "--format", "csv", "--output", path)
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    first = [row for row in rows if row["shipment_id"] == november[0]["id"]]
    assert [(row["mode"], row["element_index"]) for row in first] == [
        ("HUB", "0"), ("ROAD", "1"), ("SEA", "2"), ("HUB", "3"), ("ROAD", "4")]
    sea = first[2]
    assert (sea["origin_code"], sea["origin_label"], sea["origin_country"], sea["destination_code"],
            sea["destination_country"]) == ("CNSHA", "Shanghai", "CN", "GBFXT", "GB")
    lanes = {(row["origin_code"], row["destination_code"]) for row in rows if row["mode"] == "SEA"}
    assert lanes == {("CNSHA", "GBFXT")}
    single = [row for row in rows if not row["shipment_id"]]
    assert len(single) == 2 and all(row["calculation_id"] for row in single)


@pytest.mark.on_both
def test_a_leg_stored_before_codes_were_kept_reads_as_before(client, acme, november, emissions, tmp_path):
    from emissions.models import Calculation

    sea = next(element for element in november[0]["elements"] if element.get("mode") == "SEA")
    stored = Calculation.get_by_id(sea["calculation_id"])
    body = jsoncodec.loads(stored.body)
    body["origin"], body["destination"] = {"label": "Shanghai"}, {"label": "Felixstowe"}  # as legs were stored
    Calculation.update(body=jsoncodec.dumps(body)).where(Calculation.id == stored.id).execute()
    response = client.get(f"/v1/calculations/{stored.id}", headers=acme.headers())
    check_response(response, "/calculations/{id}", "get")
    assert response.json["origin"] == {"label": "Shanghai"}
    path = tmp_path / "november.csv"
    emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1", "--from", NOVEMBER[0],
              "--to", NOVEMBER[1], "--format", "csv", "--output", path)
    [row] = [row for row in csv.DictReader(io.StringIO(path.read_text())) if row["calculation_id"] == stored.id]
    assert (row["origin_code"], row["origin_label"], row["origin_country"], row["destination_label"]) == (
        "", "Shanghai", "", "Felixstowe")
