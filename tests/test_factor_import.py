"""Operators' own factors: create with parts, import a CSV (all or none), export the same format."""
from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest

from emissions import audit
from emissions import factor_files
from emissions import factors
from emissions import migrations
from emissions import db as db_setup
from emissions import models
from conftest import make_factor, make_org, post_calculation

HEADER = "reference,mode,name,source,region,valid_from,valid_to,ttw,wtt"


@pytest.fixture
def run(emissions, config):
    """`emissions ARGS` in-process (conftest) on a migrated database, as after `emissions migrate`:
    (exit status, stdout, stderr)."""
    migrations.run(db_setup.bind(config.database_url))
    return emissions


def thousand_rows(bad_line: int | None = None) -> str:
    """A CSV of 1,000 factors with parts; the record on `bad_line` (counting the header as 1) has ttw without wtt."""
    lines = [HEADER]
    for number in range(1, 1001):
        mode = ("ROAD", "SEA", "AIR")[number % 3]
        ttw, wtt = f"0.{number:05d}", f"0.00{number % 97:03d}"
        if len(lines) + 1 == bad_line:
            wtt = ""
        lines.append(f"fleet-{number:04d},{mode},Fleet {number},Acme telematics 2026,GB,2026-01-01,,{ttw},{wtt}")
    return "\n".join(lines) + "\n"


def write(tmp_path, text: str, name: str = "factors.csv") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- factor create with parts -------------------------------------------------------------------------

def test_factor_create_with_ttw_and_wtt_stores_their_exact_sum_and_list_shows_the_parts(run, app, ok):
    assert ok("factor", "create", "--reference", "van", "--mode", "ROAD", "--ttw", "0.10163", "--wtt", "0.02359",
              "--name", "Van", "--source", "Fleet 2026") == {"reference": "van", "version": 1, "status": "active"}
    listed = ok("factor", "list")["factors"]
    assert [(f["value"], f["ttw"], f["wtt"], f["source_row"]) for f in listed] == [
        ("0.12522", "0.10163", "0.02359", None)]
    status, out, _ = run("factor", "list")
    assert out == "van\tv1\tactive\tROAD\t0.12522\tttw 0.10163\twtt 0.02359\n"


@pytest.mark.parametrize("argv, message", [
    (["--ttw", "0.1"], "give --value, or --ttw and --wtt together"),
    (["--wtt", "0.1"], "give --value, or --ttw and --wtt together"),
    ([], "give --value, or --ttw and --wtt together"),
    (["--value", "0.2", "--ttw", "0.1", "--wtt", "0.1"], "not both"),
    (["--ttw", "-0.1", "--wtt", "0.1"], "ttw must be at least 0"),
    (["--ttw", "0", "--wtt", "0"], "ttw + wtt must be above 0"),
    (["--ttw", "abc", "--wtt", "0.1"], "ttw must be a decimal number"),
    (["--ttw", "0.1", "--wtt", "0.1", "--radiative-forcing"], "radiative_forcing applies to AIR factors only"),
])
def test_factor_create_refuses_parts_that_do_not_make_a_value(run, app, argv, message):
    status, out, err = run("factor", "create", "--reference", "van", "--mode", "ROAD", "--name", "Van",
                           "--source", "s", *argv)
    assert (status, out) == (1, "") and message in err, err
    assert not models.Factor.select().exists()


def test_an_air_factor_records_whether_it_includes_radiative_forcing(run, client, acme, ok):
    ok("factor", "create", "--reference", "air-rf", "--mode", "AIR", "--ttw", "0.9", "--wtt", "0.1",
       "--name", "Air", "--source", "s", "--radiative-forcing")
    ok("factor", "create", "--reference", "air", "--mode", "AIR", "--value", "0.6",
       "--name", "Air", "--source", "s", "--no-radiative-forcing")
    rf = post_calculation(client, acme, "k1", status=201, mode="AIR", factor_reference="air-rf")
    plain = post_calculation(client, acme, "k2", status=201, mode="AIR", factor_reference="air",
                             external_reference="s2")
    assert (rf.json["factor"]["radiative_forcing"], plain.json["factor"]["radiative_forcing"]) == (True, False)
    assert "breakdown" in rf.json["emissions"] and "breakdown" not in plain.json["emissions"]


def test_versions_stay_immutable_a_new_figure_is_a_new_version(run, client, acme):
    make_factor("parts", value=None, ttw_value="0.1", wtt_value="0.02")
    first = post_calculation(client, acme, "k1", status=201, factor_reference="parts")
    make_factor("parts", value=None, ttw_value="0.2", wtt_value="0.02")
    assert [(f.version, f.status, f.ttw_value) for f in models.Factor.select().where(
        models.Factor.reference == "parts").order_by(models.Factor.version)] == [
        (1, "superseded", Decimal("0.1")), (2, "active", Decimal("0.2"))]
    again = client.get(f"/v1/calculations/{first.json['id']}", headers=acme.headers())
    assert again.json == first.json and again.json["emissions"]["breakdown"] == {"ttw": 400, "wtt": 80}


# --- import ------------------------------------------------------------------------------------------

@pytest.mark.on_both
def test_a_thousand_factor_csv_with_one_bad_row_imports_nothing_and_names_the_row(run, tmp_path):
    status, out, err = run("factor", "import", write(tmp_path, thousand_rows(bad_line=734)), "--json")
    assert status == 1
    assert json.loads(out) == {"imported": 0, "errors": [{"line": 734, "field": "wtt",
                                                          "reason": "must be given together with ttw"}]}
    assert err.endswith("factors.csv: 1 bad row(s); nothing imported\n")
    assert not models.Factor.select().exists()
    assert not models.AuditEvent.select().where(models.AuditEvent.action == "factor.imported").exists()


@pytest.mark.on_both
def test_a_thousand_factor_csv_imports_every_row_once(run, tmp_path, client, acme, ok):
    path = write(tmp_path, thousand_rows())
    assert ok("factor", "import", path, "--org", "acme") == {
        "imported": 1000, "created": 1000, "new_versions": 0, "unchanged": 0, "organization": "acme", "draft": False}
    assert models.Factor.select().where(models.Factor.organization == acme.org).count() == 1000
    fleet = models.Factor.get(models.Factor.reference == "fleet-0734")
    assert (fleet.mode, fleet.ttw_value, fleet.wtt_value, fleet.value, fleet.status) == (
        "AIR", Decimal("0.00734"), Decimal("0.00055"), Decimal("0.00789"), "active")
    response = post_calculation(client, acme, status=201, mode="AIR", factor_reference="fleet-0734")
    assert response.json["emissions"] == {"value": 31.56, "unit": "kgCO2e", "breakdown": {"ttw": 29.36, "wtt": 2.2}}
    # Imported again: every row equals its latest version, so nothing new.
    assert ok("factor", "import", path, "--org", "acme")["unchanged"] == 1000
    assert models.Factor.select().count() == 1001  # and road-default
    events = [e for e in audit.recent(acme.org) if e.action == "factor.imported"]
    assert [json.loads(e.details)["imported"] for e in events] == [0, 1000]


@pytest.mark.parametrize("rows, problems", [
    (["v,ROAD,Van,s,,,,0.1,"], [(2, "wtt", "must be given together with ttw")]),
    (["v,ROAD,Van,s,,,,,"], [(2, "value", "is required (or ttw and wtt)")]),
    (["v,SHIP,Van,s,,,,0.1,0.1"], [(2, "mode", "must be one of ROAD, SEA, AIR, RAIL or HUB")]),
    (["v,ROAD,Van,s,,2026-13-01,,0.1,0.1"], [(2, "valid_from", "must be a date (YYYY-MM-DD)")]),
    (["v,ROAD,Van,s,,2026-02-01,2026-01-01,0.1,0.1"], [(2, "valid_to", "must not be before valid_from")]),
    (["v,ROAD,,s,,,,0.1,0.1"], [(2, "name", "must be 1 to 200 characters")]),
    (["v,ROAD,Van,s,,,,0.1,0.1", "v,ROAD,Van,s,,,,0.1,0.1"], [(3, "reference", "duplicates line 2")]),
    (["v,ROAD,Van,s,,,,0.1,0.1", "w,ROAD,Van,s,,,"], [(3, "row", "has 7 fields; the header has 9")]),
    (["road-default,SEA,Van,s,,,,0.1,0.1"], [(2, "reference", "road-default is a ROAD factor; use a new reference")]),
    (["theirs,ROAD,Van,s,,,,0.1,0.1"], [(2, "reference", "theirs already belongs to globex")]),
])
def test_each_bad_row_is_reported_with_its_line_and_nothing_is_imported(run, app, tmp_path, rows, problems):
    make_factor()
    make_factor("theirs", organization=make_org("globex"))
    status, out, _ = run("factor", "import", write(tmp_path, "\n".join([HEADER, *rows]) + "\n"), "--json")
    assert status == 1
    assert [(e["line"], e["field"], e["reason"]) for e in json.loads(out)["errors"]] == problems
    assert models.Factor.select().count() == 2


@pytest.mark.parametrize("header, reason", [
    ("reference,mode,name,source,colour,value", "has unknown column 'colour'"),
    ("reference,mode,name,value", "lacks the column 'source'"),
    ("reference,mode,name,source,ttw", "lacks the column 'value (or ttw and wtt)'"),
    ("reference,mode,name,source,value,value", "repeats a column"),
])
def test_a_bad_header_is_reported_on_line_one(run, app, tmp_path, header, reason):
    status, out, err = run("factor", "import", write(tmp_path, header + "\nv,ROAD,Van,s,0.1\n"), "--json")
    assert status == 1
    [error] = json.loads(out)["errors"]
    assert (error["line"], error["field"]) == (1, "header") and error["reason"].startswith(reason)


def test_an_import_with_value_or_parts_per_row_and_text_output(run, app, tmp_path):
    text = ("reference,mode,name,source,value,ttw,wtt,radiative_forcing\n"
            "a,AIR,Air,s,,0.5,0.1,true\n"
            "b,SEA,Sea,s,0.02,,,\n"
            "c,ROAD,Road,s,0.3,0.2,0.1,\n")
    status, out, err = run("factor", "import", write(tmp_path, text), "--draft")
    assert (status, err) == (0, "")
    assert out == "imported 3 factor versions into the global library as drafts (3 new references, 0 rows unchanged)\n"
    rows = {f.reference: (f.value, f.ttw_value, f.radiative_forcing, f.status) for f in models.Factor.select()}
    assert rows == {"a": (Decimal("0.6"), Decimal("0.5"), True, "draft"), "b": (Decimal("0.02"), None, None, "draft"),
                    "c": (Decimal("0.3"), Decimal("0.2"), None, "draft")}


def test_a_value_that_is_not_the_sum_of_the_parts_is_refused(run, app, tmp_path):
    text = "reference,mode,name,source,value,ttw,wtt\nc,ROAD,Road,s,0.31,0.2,0.1\n"
    status, out, _ = run("factor", "import", write(tmp_path, text), "--json")
    assert json.loads(out)["errors"] == [{"line": 2, "field": "value",
                                          "reason": "must equal ttw + wtt (0.3) or be left out"}]


def test_an_unreadable_file_is_one_line(run, app, tmp_path):
    status, out, err = run("factor", "import", str(tmp_path / "missing.csv"))
    assert status == 1 and err.startswith("emissions: cannot read") and err.count("\n") == 1
    (tmp_path / "latin1.csv").write_bytes(b"reference,mode,name,source,value\nv,ROAD,Caf\xe9,s,0.1\n")
    status, out, err = run("factor", "import", str(tmp_path / "latin1.csv"))
    assert status == 1 and "is not UTF-8 text; nothing imported" in err


# --- export --------------------------------------------------------------------------------------------

@pytest.mark.on_both
def test_export_writes_the_import_format_and_imports_back_the_same_factors(run, tmp_path, acme, ok):
    factor_files.load_library(actor="test")
    exported = tmp_path / "library.csv"
    assert ok("factor", "export", "--output", exported) == {
        "exported": 128 + 1, "organization": None, "file": str(exported)}  # and road-default
    with exported.open(newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert tuple(rows[0]) == factor_files.CSV_COLUMNS
    long_haul = next(row for row in rows if row["reference"] == "desnz-2025-air-freight-long-haul-with-rf")
    assert (long_haul["ttw"], long_haul["wtt"], long_haul["value"], long_haul["radiative_forcing"],
            long_haul["ttw_id"], long_haul["publication_licence"]) == (
        "0.89939", "0.13516", "1.03455", "true", "27_317_3156_14_1", "Open Government Licence v3.0")

    # Into another organization under new references: the same figures and provenance, version 1.
    renamed = exported.read_text(encoding="utf-8").replace("desnz-2025-", "copy-").replace("road-default", "copy-rd")
    outcome = ok("factor", "import", write(tmp_path, renamed, "copy.csv"), "--org", "acme")
    assert outcome["created"] == 129
    status, out, _ = run("factor", "export", "--org", "acme")
    assert status == 0 and sorted(out.splitlines()) == sorted(renamed.splitlines())


def test_export_of_an_organization_without_factors_is_the_header_alone(run, acme, ok):
    status, out, _ = run("factor", "export", "--org", "acme")
    assert (status, out) == (0, ",".join(factor_files.CSV_COLUMNS) + "\n")
    assert ok("factor", "export", "--org", "acme")["csv"] == out
    assert io.StringIO(out).readline().startswith("reference,mode,name,source")


def test_export_writes_cells_a_spreadsheet_would_run_as_text(run, acme, ok):
    ok("factor", "create", "--reference", "van", "--mode", "ROAD", "--value", "0.12522", "--org", "acme",
       "--name", '=HYPERLINK("http://evil.example","x")', "--source", "DESNZ")
    # a source stored before issue 38's text rule refused line breaks
    models.Factor.update(source=" \n@SUM(A1)").where(models.Factor.reference == "van").execute()
    status, out, _ = run("factor", "export", "--org", "acme")
    row = next(csv.DictReader(io.StringIO(out)))
    assert (status, row["name"], row["source"], row["value"]) == (
        0, '\'=HYPERLINK("http://evil.example","x")', "' \n'@SUM(A1)", "0.12522")
