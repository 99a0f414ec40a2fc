"""Every CSV the product writes, with hostile text already stored in every text column, read back by
Python's csv module cell by cell: one row per record, and no line of any cell starts a formula (issue 38)."""
from __future__ import annotations

import csv
import io
import re

import pytest

from emissions import jsoncodec
from emissions import workspace
from emissions.models import Calculation, Factor, Shipment
from conftest import post_calculation
from test_shipments import library, worked_example  # noqa: F401 (the fixture)
from test_workspace import PASSWORD, sign_in

HOSTILE = ["PO-7\r=cmd|' /C calc'!A0", "PO-8\n=1+1", "PO-9\r\n@SUM(A1)", "\t=1", "=HYPERLINK(\"x\")", "+1", "-1+1",
           "@x", "a\tb", "\r", "x\r-2", "x\n \t+3"]
FORMULA = re.compile(r"(?:\A|\r\n|\r|\n)[ \t\r\n]*[=+\-@]")


def runs_a_formula(cell: str) -> bool:
    """True when the cell, or any line inside it, would start a formula in a spreadsheet."""
    return FORMULA.search(cell) is not None


def read_back(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    assert all(len(row) == len(rows[0]) for row in rows), rows
    return rows


def check_cells(rows: list[list[str]], numeric: set[str]) -> None:
    """No cell runs a formula, except a plain number in a numeric column."""
    header = rows[0]
    for row in rows[1:]:
        for name, cell in zip(header, row):
            if name in numeric and re.fullmatch(r"-?[0-9.]+", cell):
                continue
            assert not runs_a_formula(cell), (name, cell)


def same_text(cell: str, stored: str) -> bool:
    """The cell is the stored text with only neutralising quotes added."""
    return cell.replace("'", "") == stored.replace("'", "")


@pytest.fixture
def hostile(client, acme):
    """One calculation per hostile text, the text stored (as a record from before issue 38 would be)
    in its external reference and both place labels, and in the factor's name, source and region."""
    ids = {}
    for number, text in enumerate(HOSTILE):
        response = post_calculation(client, acme, f"idem-{number}", external_reference=f"ref-{number}",
                                    activity_date="2026-03-01")
        assert response.status_int == 201, response.text
        body = response.json
        body["external_reference"] = text
        body["origin"]["label"] = body["destination"]["label"] = text
        Calculation.update(external_reference=text, body=jsoncodec.dumps(body)).where(
            Calculation.id == body["id"]).execute()
        ids[body["id"]] = text
    Factor.update(name=HOSTILE[0], source=HOSTILE[2], region=HOSTILE[1]).execute()
    return ids


def test_the_workspace_calculations_csv(client, hostile, acme):
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    rows = read_back(client.get("/workspace/calculations.csv", {"period": "all"}).text)
    header = rows[0]
    assert len(rows) == 1 + len(HOSTILE)
    check_cells(rows, {"cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e", "factor_version"})
    for row in rows[1:]:
        assert same_text(row[header.index("external_reference")], hostile[row[0]])


def test_the_workspace_calculations_csv_lists_the_statement_csv_s_rows(client, hostile, acme):
    """One row type for both files: the same header, and each calculation's row the same in each."""
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    listed = read_back(client.get("/workspace/calculations.csv", {"period": "all"}).text)
    stated = read_back(client.get("/workspace/customers/cust-1", {"period": "all", "format": "csv"}).text)
    assert listed[0] == stated[0]
    assert len(listed) == 1 + len(HOSTILE) and sorted(listed[1:]) == sorted(stated[1:])


def statement_checks(text: str, hostile: dict) -> None:
    rows = read_back(text)
    header = rows[0]
    assert len(rows) == 1 + len(HOSTILE)
    check_cells(rows, {"scope3_category", "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e",
                       "emissions_ttw_kgco2e", "emissions_wtt_kgco2e", "factor_version"})
    for row in rows[1:]:
        stored = hostile[row[header.index("calculation_id")]]
        for column in ("external_reference", "origin_label", "destination_label"):
            assert same_text(row[header.index(column)], stored), column
        assert same_text(row[header.index("factor_name")], HOSTILE[0])
        assert same_text(row[header.index("factor_source")], HOSTILE[2])


def test_the_cli_statement_csv(emissions, hostile, tmp_path):
    output = tmp_path / "statement.csv"
    status, _, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--format", "csv", "--output", output)
    assert status == 0, err
    statement_checks(output.read_bytes().decode(), hostile)


def test_the_workspace_statement_csv(client, hostile, acme):
    workspace.create_user(acme.org, "ops@acme.example", PASSWORD, actor="cli")
    sign_in(client)
    statement_checks(client.get("/workspace/customers/cust-1", {"period": "all", "format": "csv"}).text, hostile)


def test_the_factor_export(emissions, hostile):
    status, out, err = emissions("factor", "export")
    assert status == 0, err
    rows = read_back(out)
    header = rows[0]
    assert len(rows) == 2
    check_cells(rows, {"value", "ttw", "wtt"})
    for column, stored in (("name", HOSTILE[0]), ("source", HOSTILE[2]), ("region", HOSTILE[1])):
        assert same_text(rows[1][header.index(column)], stored), column


def test_the_statement_csv_hub_rows(emissions, client, acme, library, tmp_path):
    """A hub row's location and its shipment's external reference, stored hostile, in the statement CSV."""
    body = client.post_json("/v1/shipments", worked_example(), headers=acme.headers("ship-1"), status=201).json
    text = HOSTILE[0]
    for element in body["elements"]:
        if element["type"] == "hub":
            element["location"] = {"label": text}
    body["external_reference"] = HOSTILE[2]
    Shipment.update(external_reference=HOSTILE[2], body=jsoncodec.dumps(body)).execute()
    output = tmp_path / "statement.csv"
    status, _, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                               "--format", "csv", "--output", output)
    assert status == 0, err
    rows = read_back(output.read_bytes().decode())
    header = rows[0]
    hub_rows = [row for row in rows[1:] if row[header.index("mode")] == "HUB"]
    assert len(hub_rows) == 1 and len(rows) == 1 + len(body["elements"])
    check_cells(rows, {"scope3_category", "cargo_tonnes", "distance_km", "activity_tkm", "emissions_kgco2e",
                       "emissions_ttw_kgco2e", "emissions_wtt_kgco2e", "factor_version", "element_index"})
    assert same_text(hub_rows[0][header.index("origin_label")], text)
    assert same_text(hub_rows[0][header.index("external_reference")], HOSTILE[2])
