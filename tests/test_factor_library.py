"""The DESNZ 2025 freight library: loaded whole, equal to the shared file, loaded again safely; answers with parts."""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from emissions import audit
from emissions import sandbox
from emissions.cli import service as cli_service
from emissions.rollups import recount
from emissions import factor_files
from emissions import factors
from emissions import jsoncodec
from emissions import migrations
from emissions import db as db_setup
from emissions import models
from emissions.db import bind
from conftest import make_factor, post_calculation

SHARED_FILE = Path(__file__).resolve().parents[1].parent / "shared" / "factors" / "desnz-2025-freight.csv"
# Written out here rather than taken from the build script, so that the test checks the script too.
MODE_OF_FAMILY = {"Vans": "ROAD", "HGV (all diesel)": "ROAD", "HGV refrigerated (all diesel)": "ROAD",
                  "Cargo ship": "SEA", "Sea tanker": "SEA", "Freight flights": "AIR",
                  "Rail": "RAIL"}  # RAIL: for shipments' legs
SIX_PLACES = Decimal("0.000001")


def shared_rows() -> list[dict]:
    if not SHARED_FILE.exists():
        pytest.skip(f"the shared factor file is not beside the repository ({SHARED_FILE})")
    with SHARED_FILE.open(newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def mapped(rows: list[dict]) -> list[dict]:
    return [row for row in rows if row["ttw_kgco2e"] and row["wtt_kgco2e"] and row["level_2"] in MODE_OF_FAMILY]


@pytest.fixture
def run(emissions, config):
    """`emissions ARGS` in-process (conftest) on a migrated database, as after `emissions migrate`:
    (exit status, stdout, stderr)."""
    migrations.run(db_setup.bind(config.database_url))
    return emissions


# --- the library against the shared file ------------------------------------------------------------

@pytest.mark.on_both
def test_load_library_loads_every_mapped_row_of_the_shared_file_with_equal_values(run, ok):
    rows = shared_rows()
    loaded = ok("factor", "load-library")
    listed = ok("factor", "list")["factors"]
    by_row: dict[tuple, list[dict]] = {}
    for factor in listed:
        assert factor["source_row"] is not None, factor["reference"]
        by_row.setdefault((factor["source_row"]["ttw_id"], factor["source_row"]["wtt_id"]), []).append(factor)

    expected = mapped(rows)
    assert len(expected) == 127
    assert loaded["created"] == len(listed) == len(expected) + 1  # and one alias
    for row in expected:
        found = by_row.pop((row["ttw_id"], row["wtt_id"]))
        for factor in found:  # the row itself, and an alias of it
            assert factor["status"] == "active" and factor["version"] == 1 and factor["organization"] is None
            assert factor["mode"] == MODE_OF_FAMILY[row["level_2"]]
            assert Decimal(factor["ttw"]) == Decimal(row["ttw_kgco2e"]), factor["reference"]
            assert Decimal(factor["wtt"]) == Decimal(row["wtt_kgco2e"]), factor["reference"]
            assert Decimal(factor["value"]) == Decimal(row["wtw_kgco2e"]) == Decimal(factor["ttw"]) + Decimal(
                factor["wtt"]), factor["reference"]
            assert factor["radiative_forcing"] == {"With RF": True, "Without RF": False}.get(row["level_4"])
            assert factor["publication"] == {"title": "Greenhouse gas reporting: conversion factors 2025",
                                             "publisher": "Department for Energy Security and Net Zero (DESNZ)",
                                             "year": 2025, "licence": "Open Government Licence v3.0"}
    assert by_row == {}  # nothing loaded that the file does not hold (rail, empty rows)


def test_the_shipped_library_is_the_shared_file_built_again():
    rows = shared_rows()
    script = Path(__file__).resolve().parents[1] / "scripts" / "build_factor_library.py"
    spec = importlib.util.spec_from_file_location("build_factor_library", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build(SHARED_FILE) == json.loads(factor_files.LIBRARY_PATH.read_text(encoding="utf-8"))
    assert len(rows) == 154


def test_the_package_cites_the_publication_itself():
    library = json.loads(factor_files.LIBRARY_PATH.read_text(encoding="utf-8"))
    assert library["publication"]["title"] == "Greenhouse gas reporting: conversion factors 2025"
    assert library["publication"]["licence"] == "Open Government Licence v3.0"
    assert library["publication"]["year"] == 2025
    assert "NOT compared with the official DESNZ 2025 workbook" in library["verification"]
    assert "shared/" not in factor_files.LIBRARY_PATH.read_text(encoding="utf-8")


@pytest.mark.parametrize("reference, forcing, value", [
    ("desnz-2025-air-freight-long-haul", False, "0.66646"),
    ("desnz-2025-air-freight-long-haul-with-rf", True, "1.03455"),
    ("desnz-2025-air-freight-long-haul-without-rf", False, "0.66646"),  # the alias the library had before
    ("desnz-2025-air-freight-domestic", False, "3.29360"),
    ("desnz-2025-road-hgv-diesel-average-laden", None, "0.12522"),
    ("desnz-2025-road-hgv-diesel-artic-33t-average-laden", None, "0.09502"),
    ("desnz-2025-road-hgv-refrigerated-diesel-rigid-7.5-17t-50pct-laden", None, "0.39080"),
    ("desnz-2025-road-van-average-diesel", None, "0.78225"),
    ("desnz-2025-sea-container-ship-average", None, "0.01977"),
    ("desnz-2025-sea-crude-tanker-120000-199999-dwt", None, "0.00546"),
])
def test_references_follow_the_documented_scheme(app, reference, forcing, value):
    factor_files.load_library(actor="test")
    factor = models.Factor.get((models.Factor.reference == reference) & (models.Factor.status == "active"))
    assert (factor.radiative_forcing, factor.value) == (forcing, Decimal(value))


# --- loading again ---------------------------------------------------------------------------------

@pytest.mark.on_both
def test_loading_the_library_again_creates_no_version_and_is_audited(run, ok):
    first = ok("factor", "load-library")
    count = models.Factor.select().count()
    again = ok("factor", "load-library")
    assert (again["created"], again["updated"], again["unchanged"], again["skipped"]) == (0, 0, count, [])
    assert models.Factor.select().count() == count == first["created"]
    events = [event for event in audit.recent(limit=10) if event.action == "factor.library_loaded"]
    assert [json.loads(event.details)["created"] for event in events] == [0, count]
    assert {event.actor for event in events} == {"cli"}


def test_load_library_prints_a_readable_summary(run):
    status, out, err = run("factor", "load-library")
    assert (status, err) == (0, "")
    assert out == ("Greenhouse gas reporting: conversion factors 2025 (Department for Energy Security and Net Zero "
                   "(DESNZ), Open Government Licence v3.0): 128 created, 0 updated, 0 unchanged, 0 skipped\n")


@pytest.mark.on_both
def test_a_database_with_the_first_six_factor_library_gets_new_versions_and_keeps_its_calculations(client, acme):
    # What the earlier library loaded: parts, no row ids, no publication, an older name and source.
    old = make_factor("desnz-2025-road-hgv-diesel-average-laden", value="0.12522", ttw_value="0.10163",
                      wtt_value="0.02359", name="HGV (all diesel), All HGVs, Average laden",
                      source="UK DESNZ Greenhouse gas reporting: conversion factors 2025", region="GB")
    before = post_calculation(client, acme, "k1", status=201, factor_reference=old.reference)
    stored = models.Calculation.get_by_id(before.json["id"]).body

    outcome = factor_files.load_library(actor="test")
    assert outcome.updated == [old.reference] and len(outcome.created) == 127
    new = models.Factor.get((models.Factor.reference == old.reference) & (models.Factor.status == "active"))
    assert (new.version, new.value, new.ttw_id) == (2, Decimal("0.12522"), "27_304_3140_14_1")
    assert models.Factor.get_by_id(old.id).status == "superseded"

    assert client.get(f"/v1/calculations/{before.json['id']}", headers=acme.headers()).body.decode() == stored
    assert models.Calculation.get_by_id(before.json["id"]).body == stored
    after = post_calculation(client, acme, "k2", status=201, factor_reference=old.reference, external_reference="s2")
    assert after.json["factor"]["version"] == 2
    assert after.json["emissions"] == {"value": 500.88, "unit": "kgCO2e", "breakdown": {"ttw": 406.52, "wtt": 94.36}}


def test_a_retired_library_reference_stays_retired_and_a_private_one_is_left_to_its_owner(app, acme):
    make_factor("desnz-2025-sea-container-ship-average", mode="SEA", value="0.02", organization=acme.org)
    factor_files.load_library(actor="test")
    factors.retire("desnz-2025-road-van-average-diesel", actor="test")
    outcome = factor_files.load_library(actor="test")
    assert sorted(outcome.skipped) == [("desnz-2025-road-van-average-diesel", "is retired"),
                                       ("desnz-2025-sea-container-ship-average", "belongs to acme")]
    assert not models.Factor.select().where((models.Factor.reference == "desnz-2025-road-van-average-diesel")
                                            & (models.Factor.status == "active")).exists()


def test_quickstart_seeds_the_whole_library(config, app):
    cli_service.seed_sandbox(config)
    assert models.Factor.select().count() == 128  # 127 rows and one alias
    assert models.Factor.get(models.Factor.reference == sandbox.QUICKSTART_FACTOR).ttw_id == "27_304_3140_14_1"


# --- answers with parts ----------------------------------------------------------------------------

def exact(response) -> dict:
    return jsoncodec.loads(response.body)


@pytest.mark.on_both
def test_a_calculation_on_every_library_factor_answers_parts_that_add_up_exactly(run, client, acme, ok):
    ok("factor", "load-library")
    library = models.Factor.select().where((models.Factor.status == "active") & models.Factor.ttw_id.is_null(False)
                                           & (models.Factor.mode != "RAIL"))  # the v1 calculation has no RAIL
    library = library.order_by(models.Factor.reference)
    for number, factor in enumerate(library):
        response = post_calculation(client, acme, f"k{number}", status=201, mode=factor.mode,
                                    factor_reference=factor.reference, external_reference=f"s{number}",
                                    cargo={"value": 7.333333, "unit": "tonne"},
                                    distance={"value": 1234.567, "unit": "km"})
        body = exact(response)
        emissions, parts = body["emissions"]["value"], body["emissions"]["breakdown"]
        activity = body["activity"]["value"]
        assert parts["ttw"] == (activity * factor.ttw_value).quantize(SIX_PLACES, rounding=ROUND_HALF_EVEN)
        assert parts["ttw"] + parts["wtt"] == emissions, factor.reference
        assert parts["wtt"] >= 0
        assert body["factor"]["radiative_forcing"] == factor.radiative_forcing
    analytics = exact(client.get("/v1/customers/cust-1/emissions", headers=acme.headers()))["analytics"]
    total = analytics["emissions"]
    assert analytics["calculation_count"] == 127 and total["breakdown"]["unattributed"] == 0
    assert total["breakdown"]["ttw"] + total["breakdown"]["wtt"] == total["value"]
    assert recount.verify().drifted == []


@pytest.mark.parametrize("ttw, wtt, expected", [
    ("0.0000005", "0.0000015", {"value": Decimal("0.000002"), "ttw": Decimal("0"), "wtt": Decimal("0.000002")}),
    ("0.0000015", "0.0000005", {"value": Decimal("0.000002"), "ttw": Decimal("0.000002"), "wtt": Decimal("0")}),
    ("0.0000025", "0.0000025", {"value": Decimal("0.000005"), "ttw": Decimal("0.000002"), "wtt": Decimal("0.000003")}),
    ("0", "0.1", {"value": Decimal("0.1"), "ttw": Decimal("0"), "wtt": Decimal("0.1")}),
])
def test_ttw_is_rounded_half_even_to_six_places_and_wtt_is_the_rest(client, acme, ttw, wtt, expected):
    make_factor("parts", value=None, ttw_value=ttw, wtt_value=wtt)
    response = post_calculation(client, acme, status=201, factor_reference="parts",
                                cargo={"value": 1, "unit": "tonne"}, distance={"value": 1, "unit": "km"})
    emissions = exact(response)["emissions"]
    assert emissions == {"value": expected["value"], "unit": "kgCO2e",
                         "breakdown": {"ttw": expected["ttw"], "wtt": expected["wtt"]}}
    stored = models.Calculation.get_by_id(response.json["id"])
    assert (stored.emissions_ttw_kg, stored.emissions_wtt_kg) == (expected["ttw"], expected["wtt"])


def test_a_factor_without_parts_answers_no_breakdown(client, acme):
    response = post_calculation(client, acme, status=201)
    assert response.json["emissions"] == {"value": 500.88, "unit": "kgCO2e"}
    stored = models.Calculation.get_by_id(response.json["id"])
    assert (stored.emissions_ttw_kg, stored.emissions_wtt_kg) == (None, None)


@pytest.mark.on_both
def test_the_webhook_event_carries_the_same_body_with_its_breakdown(client, acme):
    make_factor("parts", value=None, ttw_value="0.1", wtt_value="0.02")
    response = post_calculation(client, acme, status=201, factor_reference="parts")
    event = models.WebhookEvent.get(models.WebhookEvent.type == "calculation.succeeded")
    data = json.loads(event.payload)["data"]
    assert data == response.json
    assert data["emissions"]["breakdown"] == {"ttw": 400, "wtt": 80}


@pytest.mark.on_both
def test_analytics_split_ttw_wtt_and_unattributed_so_the_three_add_up(client, acme):
    make_factor("parts", value=None, ttw_value="0.10163", wtt_value="0.02359")
    make_factor("sea-parts", mode="SEA", value=None, ttw_value="0.01612", wtt_value="0.00365")
    posts = [("road-default", "ROAD", "upstream"), ("parts", "ROAD", "upstream"), ("parts", "ROAD", "downstream"),
             ("sea-parts", "SEA", "downstream")]
    bodies = []
    for number, (reference, mode, context) in enumerate(posts):
        bodies.append(exact(post_calculation(
            client, acme, f"k{number}", status=201, factor_reference=reference, mode=mode, business_context=context,
            external_reference=f"s{number}", cargo={"value": 3.333333, "unit": "tonne"},
            distance={"value": 777.7777, "unit": "km"})))
    analytics = exact(client.get("/v1/customers/cust-1/emissions", headers=acme.headers()))["analytics"]

    def split(selected):
        with_parts = [b["emissions"]["breakdown"] for b in selected if "breakdown" in b["emissions"]]
        return {"ttw": sum(p["ttw"] for p in with_parts), "wtt": sum(p["wtt"] for p in with_parts),
                "unattributed": sum(b["emissions"]["value"] for b in selected if "breakdown" not in b["emissions"])}

    assert analytics["emissions"]["breakdown"] == split(bodies)
    assert analytics["emissions"]["breakdown"]["unattributed"] == bodies[0]["emissions"]["value"]
    assert sum(analytics["emissions"]["breakdown"].values()) == analytics["emissions"]["value"]
    assert analytics["by_mode"]["ROAD"]["emissions"]["breakdown"] == split(bodies[:3])
    assert analytics["by_mode"]["SEA"]["emissions"]["breakdown"] == split(bodies[3:])
    assert analytics["by_business_context"]["upstream"]["emissions"]["breakdown"] == split(bodies[:2])
    assert recount.verify().drifted == []


@pytest.mark.on_both
def test_verify_finds_a_rollup_whose_ttw_sum_drifted_and_rebuild_repairs_it(client, acme):
    make_factor("parts", value=None, ttw_value="0.1", wtt_value="0.02")
    post_calculation(client, acme, status=201, factor_reference="parts")
    before = client.get("/v1/customers/cust-1/emissions", headers=acme.headers()).json
    models.CustomerRollup.update(emissions_ttw_kg=Decimal("1")).execute()
    drifted = recount.verify().drifted
    assert [row["expected"]["emissions_ttw_kg"] for row in drifted[0].to_dict()["rows"]] == ["400"]
    assert [row["stored"]["emissions_ttw_kg"] for row in drifted[0].to_dict()["rows"]] == ["1"]
    recount.rebuild()
    assert recount.verify().drifted == []
    assert client.get("/v1/customers/cust-1/emissions", headers=acme.headers()).json == before


@pytest.mark.on_both
def test_rollups_made_before_the_parts_existed_count_as_unattributed(client, acme):
    post_calculation(client, acme, "k1", status=201)
    models.CustomerRollup.update(emissions_ttw_kg=Decimal(0), emissions_wtt_kg=Decimal(0)).execute()
    make_factor("parts", value=None, ttw_value="0.1", wtt_value="0.02")
    post_calculation(client, acme, "k2", status=201, factor_reference="parts", external_reference="s2")
    breakdown = exact(client.get("/v1/customers/cust-1/emissions", headers=acme.headers()))["analytics"][
        "emissions"]["breakdown"]
    assert breakdown == {"ttw": Decimal("400"), "wtt": Decimal("80"), "unattributed": Decimal("500.88")}


def test_factor_lineage_never_carries_the_parts(client, acme):
    make_factor("parts", value=None, ttw_value="0.0987654", wtt_value="0.0123456")
    response = post_calculation(client, acme, status=201, factor_reference="parts")
    assert "987654" not in response.text and "123456" not in response.text
    assert set(response.json["emissions"]["breakdown"]) == {"ttw", "wtt"}


def test_a_production_database_migrated_and_loaded_by_the_console_command_has_the_library(tmp_path):
    emissions = Path(sys.executable).with_name("emissions")
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'production.sqlite3'}"}

    def command(*argv) -> dict:
        done = subprocess.run([str(emissions), *argv, "--json"], env=environment, capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)  # not the repository: the package finds its own data
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        return json.loads(done.stdout)

    assert "0006_factor_parts_and_breakdown" in command("migrate")["applied"]
    assert command("factor", "load-library")["created"] == 128
    listed = command("factor", "list")["factors"]
    assert len(listed) == 128 and all(factor["status"] == "active" for factor in listed)


@pytest.mark.on_both
def test_several_processes_loading_the_library_at_once_create_each_version_once(database_url, tmp_path):
    emissions = Path(sys.executable).with_name("emissions")
    environment = {**os.environ, "DATABASE_URL": database_url}  # migrated by the fixture
    running = [subprocess.Popen([str(emissions), "factor", "load-library", "--json"], env=environment, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path) for _ in range(3)]
    results = [(process.wait(timeout=120), *process.communicate()) for process in running]
    assert [status for status, _, _ in results] == [0, 0, 0], [err for _, _, err in results]
    outcomes = [json.loads(out) for _, out, _ in results]
    assert sorted(outcome["created"] for outcome in outcomes) == [0, 0, 128]
    bind(database_url)
    assert models.Factor.select().count() == 128
    assert models.Factor.select().where(models.Factor.version != 1).count() == 0
