"""Operator CLI for customers (update, list, import) and for the analytics rollups (verify, rebuild)."""
from __future__ import annotations

import io
import threading
import json
from decimal import Decimal

import peewee as pw
import pytest

from emissions.cli import analytics as cli_analytics
from emissions.cli.render import ProgressBar
from emissions import analytics as customer_analytics
from emissions.rollups import recount
from emissions import customers
from conftest import auth_headers, logistics_body, make_customer, make_key, post_calculation
from emissions.models import AuditEvent, Customer, CustomerRollup


@pytest.fixture
def run(emissions):
    """`emissions ARGS` in-process (conftest): (exit status, stdout, stderr)."""
    return emissions


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("emissions: ")
    return err


def references(org, environment: str = "test") -> list[str]:
    return [c.reference for c in Customer.select().where((Customer.organization == org)
                                                         & (Customer.environment == environment))
            .order_by(Customer.reference)]


# --- customer update ---------------------------------------------------------------------------

def test_customer_update_changes_name_country_and_status(run, acme):
    status, out, err = run("customer", "update", "--org", "acme", "--env", "test", "--reference", "cust-1",
                           "--name", "Cust One GmbH", "--country", "de", "--status", "suspended", "--json")
    assert (status, err) == (0, "")
    assert json.loads(out) == {"reference": "cust-1", "name": "Cust One GmbH", "status": "suspended",
                               "country_code": "DE", "analytics": None, "environment": "test",
                               "organization": "acme"}
    stored = Customer.get_by_id(acme.customer.id)
    assert (stored.name, stored.country_code, stored.status) == ("Cust One GmbH", "DE", "suspended")


def test_customer_update_changes_only_what_is_given_and_none_clears_the_country(run, acme):
    acme.customer.country_code = "GB"
    acme.customer.save()
    run("customer", "update", "--org", "acme", "--env", "test", "--reference", "cust-1", "--status", "archived")
    assert (Customer.get_by_id(acme.customer.id).country_code, Customer.get_by_id(acme.customer.id).status) == (
        "GB", "archived")
    status, out, _ = run("customer", "update", "--org", "acme", "--env", "test", "--reference", "cust-1",
                         "--country", "none", "--json")
    assert status == 0 and json.loads(out)["country_code"] is None
    assert Customer.get_by_id(acme.customer.id).name == "Customer cust-1"


def test_a_suspended_customer_can_be_reactivated_and_charged_again(run, client, acme):
    run("customer", "update", "--org", "acme", "--env", "test", "--reference", "cust-1", "--status", "suspended")
    assert post_calculation(client, acme, "k1").json["error"]["code"] == "CUSTOMER_ACCESS_DENIED"
    run("customer", "update", "--org", "acme", "--env", "test", "--reference", "cust-1", "--status", "active")
    post_calculation(client, acme, "k1", status=201)


@pytest.mark.parametrize("arguments, message", [
    (["--reference", "nope", "--name", "X"], "emissions: no customer nope in acme (test)\n"),
    (["--reference", "cust-1"], "emissions: nothing to change: give --name, --country or --status\n"),
    (["--reference", "cust-1", "--country", "GBR"], "emissions: country must be a two-letter country code\n"),
    (["--reference", "cust-1", "--country", "1A"], "emissions: country must be a two-letter country code\n"),
    (["--reference", "cust-1", "--name", "  "], "emissions: name is required\n"),
    (["--reference", "cust-1", "--name", "n" * 201], "emissions: name must be at most 200 characters\n"),
])
def test_customer_update_refuses_bad_input_with_one_line(run, acme, arguments, message):
    status, out, err = run("customer", "update", "--org", "acme", "--env", "test", *arguments)
    assert (status, out, err) == (1, "", message)
    assert Customer.get_by_id(acme.customer.id).name == "Customer cust-1"


def test_customer_update_only_finds_the_customer_in_the_given_environment(run, acme):
    status, _, err = run("customer", "update", "--org", "acme", "--env", "live", "--reference", "cust-1",
                         "--name", "X")
    assert (status, err) == (1, "emissions: no customer cust-1 in acme (live)\n")


def test_customer_create_applies_the_same_rules(run, acme):
    status, _, err = run("customer", "create", "--org", "acme", "--env", "test", "--reference", "new-1",
                         "--name", "n" * 201)
    assert (status, err) == (1, "emissions: name must be at most 200 characters\n")
    status, _, err = run("customer", "create", "--org", "acme", "--env", "test", "--reference=-bad",
                         "--name", "Bad")
    assert status == 1 and "reference must start with a letter or digit" in one_line(err)
    # A final newline breaks the pattern too (Python's `$` alone would let it through, and the
    # customer could then be charged but never read back by its path).
    status, _, err = run("customer", "create", "--org", "acme", "--env", "test", "--reference", "new-1\n",
                         "--name", "Newline")
    assert status == 1 and "reference" in one_line(err)
    assert references(acme.org) == ["cust-1"]


# --- customer list -----------------------------------------------------------------------------

def test_customer_list_filters_by_environment_and_status(run, acme, globex):
    make_customer(acme.org, "b-suspended", status="suspended", country_code="FR", name="B")
    make_customer(acme.org, "a-live", environment="live", name="A")
    status, out, err = run("customer", "list", "--org", "acme", "--json")
    assert (status, err) == (0, "")
    assert [(c["environment"], c["reference"]) for c in json.loads(out)["customers"]] == [
        ("live", "a-live"), ("test", "b-suspended"), ("test", "cust-1")]
    _, out, _ = run("customer", "list", "--org", "acme", "--env", "test", "--status", "suspended", "--json")
    assert json.loads(out) == {"customers": [{"reference": "b-suspended", "name": "B", "status": "suspended",
                                              "country_code": "FR", "analytics": None, "environment": "test",
                                              "organization": "acme"}]}
    _, out, _ = run("customer", "list", "--org", "acme", "--env", "live")
    assert out == "live\ta-live\tactive\t-\tA\n"
    _, out, _ = run("customer", "list", "--org", "acme", "--status", "archived")
    assert out == "no customers\n"


def test_customer_list_of_an_unknown_organization_fails(run, acme):
    assert run("customer", "list", "--org", "nope") == (1, "", "emissions: no organization with slug nope\n")


# --- customer import ---------------------------------------------------------------------------

def write(tmp_path, text: str, name: str = "customers.csv", encoding: str = "utf-8") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_import_creates_every_row(run, client, acme, tmp_path):
    path = write(tmp_path, "\ufeffReference, Name ,country,status\r\n"
                           "acct-1,Northwind Ltd,gb,\r\n"
                           "\r\n"
                           ' acct:eu/2 ,"Contoso, Inc.",,suspended\r\n'
                           "acct-3,Fabrikam,DE,archived\r\n")
    status, out, err = run("customer", "import", path, "--org", "acme", "--env", "test", "--json")
    assert (status, err) == (0, "")
    assert json.loads(out) == {"imported": 3, "organization": "acme", "environment": "test"}
    rows = {c.reference: (c.name, c.country_code, c.status)
            for c in Customer.select().where(Customer.organization == acme.org)}
    assert rows == {"cust-1": ("Customer cust-1", None, "active"),
                    "acct-1": ("Northwind Ltd", "GB", "active"),
                    "acct:eu/2": ("Contoso, Inc.", None, "suspended"),
                    "acct-3": ("Fabrikam", "DE", "archived")}
    response = client.get("/v1/customers/acct:eu/2", headers=acme.headers(), status=200)
    assert response.json["name"] == "Contoso, Inc."
    [event] = AuditEvent.select().where(AuditEvent.action == "customer.imported")
    assert (event.actor, event.target, event.organization_id, event.environment) == ("cli", path, acme.org.id, "test")
    assert json.loads(event.details) == {"imported": 3}


def test_import_needs_only_reference_and_name_columns(run, acme, tmp_path):
    path = write(tmp_path, "name,reference\nOne,r-1\nTwo,r-2\n")
    status, out, _ = run("customer", "import", path, "--org", "acme", "--env", "live")
    assert (status, out) == (0, "imported 2 customers into acme (live)\n")
    assert references(acme.org, "live") == ["r-1", "r-2"]
    assert references(acme.org, "test") == ["cust-1"]


def test_import_with_any_bad_row_imports_nothing_and_reports_every_bad_row(run, acme, globex, tmp_path):
    make_customer(acme.org, "taken")
    make_customer(acme.org, "live-only", environment="live")
    make_customer(globex.org, "globex-only")
    path = write(tmp_path, "\n".join([
        "reference,name,country,status",
        "good-1,Good One,GB,active",                   # 2
        "-bad,Bad Reference,,",                         # 3
        "good-2,,,",                                    # 4
        "good-3,Three,GBR,",                            # 5
        "good-4,Four,,closed",                          # 6
        "good-1,Again,,",                               # 7
        "taken,Taken,,",                                # 8
        "live-only,Fine here,,",                        # 9
        "globex-only,Fine here,,",                      # 10
        "x" * 121 + ",Long,,",                          # 11
        "good-5,Five,,,extra",                          # 12
        'good-6,"Six',                                  # 13: a quoted name spanning two lines
        'Part Two",,',
        "good-7," + "n" * 201 + ",,",                   # 15
    ]) + "\n")
    status, out, err = run("customer", "import", path, "--org", "acme", "--env", "test", "--json")
    assert status == 1
    assert err == f"emissions: {path}: 10 bad row(s); nothing imported\n"
    assert json.loads(out) == {"imported": 0, "errors": [
        {"line": 3, "field": "reference", "reason": "must start with a letter or digit and hold only letters, "
                                                    "digits and . _ : / -"},
        {"line": 4, "field": "name", "reason": "is required"},
        {"line": 5, "field": "country", "reason": "must be a two-letter country code"},
        {"line": 6, "field": "status", "reason": "must be one of active, suspended, archived"},
        {"line": 7, "field": "reference", "reason": "duplicates line 2"},
        {"line": 8, "field": "reference", "reason": "already exists in acme (test)"},
        {"line": 11, "field": "reference", "reason": "must be at most 120 characters"},
        {"line": 12, "field": "row", "reason": "has 5 fields; the header has 4"},
        {"line": 13, "field": "name", "reason": "must not contain control characters, bidirectional controls or unpaired surrogates"},
        {"line": 15, "field": "name", "reason": "must be at most 200 characters"},
    ]}
    assert references(acme.org) == ["cust-1", "taken"]
    assert not AuditEvent.select().where(AuditEvent.action == "customer.imported").exists()


def test_import_reports_bad_rows_as_text_lines(run, acme, tmp_path):
    path = write(tmp_path, "reference,name\nok,Fine\nbad ref,Bad\n")
    status, out, err = run("customer", "import", path, "--org", "acme", "--env", "test")
    assert status == 1
    assert out == "line 3: reference must start with a letter or digit and hold only letters, digits and . _ : / -\n"
    assert one_line(err)
    assert references(acme.org) == ["cust-1"]


@pytest.mark.parametrize("text, reason", [
    ("", "is missing; expected reference,name,country,status"),
    ("reference,name,email\n", "has unknown column 'email'; expected reference,name,country,status"),
    ("reference,country\n", "lacks the column 'name'; expected reference,name,country,status"),
    ("reference,name,name\n", "repeats a column; expected reference,name,country,status"),
])
def test_import_checks_the_header(run, acme, tmp_path, text, reason):
    status, out, _ = run("customer", "import", write(tmp_path, text), "--org", "acme", "--env", "test", "--json")
    assert status == 1
    assert json.loads(out)["errors"] == [{"line": 1, "field": "header", "reason": reason}]


def test_a_file_with_only_a_header_imports_nothing_and_succeeds(run, acme, tmp_path):
    status, out, _ = run("customer", "import", write(tmp_path, "reference,name\n"), "--org", "acme", "--env", "test",
                         "--json")
    assert (status, json.loads(out)["imported"]) == (0, 0)


def test_import_refuses_a_file_that_is_not_utf8_or_does_not_exist(run, acme, tmp_path):
    path = write(tmp_path, "reference,name\nok,Fine\nzoe,Zoë\n", encoding="latin-1")
    status, out, err = run("customer", "import", path, "--org", "acme", "--env", "test")
    assert (status, out, err) == (1, "", f"emissions: {path} is not UTF-8 text; nothing imported\n")
    missing = str(tmp_path / "missing.csv")
    status, _, err = run("customer", "import", missing, "--org", "acme", "--env", "test")
    assert (status, err) == (1, f"emissions: cannot read {missing}: No such file or directory\n")
    assert references(acme.org) == ["cust-1"]


@pytest.mark.on_both
def test_import_is_one_transaction(acme, monkeypatch):
    # A row the database refuses after validation (a concurrent creation) rolls every row back.
    inserts = []
    original_insert_many = Customer.insert_many

    def insert_many_racing(rows):
        inserts.append(len(rows))
        if len(inserts) == 2:  # the first 500 rows are in; now someone else takes a reference
            make_customer(acme.org, rows[-1]["reference"])
        return original_insert_many(rows)

    monkeypatch.setattr(Customer, "insert_many", insert_many_racing)
    with pytest.raises(pw.IntegrityError):
        customers.import_customers(acme.org, "test", io.StringIO("reference,name\n" + "".join(
            f"r-{n},Name {n}\n" for n in range(600))), actor="test")
    assert inserts == [500, 100]
    assert Customer.select().where(Customer.reference.startswith("r-")).count() == 0


# --- analytics verify / rebuild -----------------------------------------------------------------

def seed(client, acme, globex, secret):
    """Calculations for acme (test and live) and globex; returns acme's live key."""
    for number in range(3):
        post_calculation(client, acme, f"a{number}", status=201, external_reference=f"s{number}",
                         business_context=("upstream", "downstream")[number % 2],
                         cargo={"value": 1.5 + number, "unit": "tonne"})
    post_calculation(client, globex, "g1", status=201)
    live_key = make_key(acme.org, secret, environment="live")
    make_customer(acme.org, "cust-1", environment="live")
    client.post_json("/v1/emissions/logistics", logistics_body(activity_date="2026-05-05"),
                     headers=auth_headers(live_key, "l1"), status=201)
    return live_key


def rollup(customer, mode="ROAD", context="upstream"):
    return CustomerRollup.get((CustomerRollup.customer == customer.id) & (CustomerRollup.mode == mode)
                              & (CustomerRollup.business_context == context))


@pytest.mark.on_both
def test_verify_finds_no_drift_in_rollups_written_by_calculations(run, client, acme, globex, secret):
    seed(client, acme, globex, secret)
    status, out, err = run("analytics", "verify", "--json")
    assert (status, err) == (0, "")
    assert json.loads(out) == {"customers": 3, "calculations": 5, "drifted": [], "organizations_drifted": []}
    status, out, _ = run("analytics", "verify")
    assert (status, out) == (0, "checked 3 customers, 5 calculations: 0 drifted\n")


NO_PARTS = {"emissions_ttw_kg": "0", "emissions_wtt_kg": "0"}  # the calculations' factors have no TTW/WTT parts


@pytest.mark.on_both
def test_verify_reports_drift_with_expected_and_stored_and_rebuild_repairs_it(run, client, acme, globex, secret):
    seed(client, acme, globex, secret)
    before = client.get("/v1/customers/cust-1/emissions", headers=acme.headers(), status=200).json
    damaged = rollup(acme.customer)
    CustomerRollup.update(calculation_count=7, emissions_kg=Decimal("1.5")).where(
        CustomerRollup.id == damaged.id).execute()
    rollup(acme.customer, context="downstream").delete_instance()
    idle = make_customer(globex.org, "idle")
    CustomerRollup.create(customer=idle, environment="test", mode="SEA", business_context="downstream",
                          calculation_count=1, activity_tkm=Decimal("2"), emissions_kg=Decimal("3"),
                          first_activity_date=damaged.first_activity_date,
                          last_activity_date=damaged.last_activity_date)

    status, out, err = run("analytics", "verify", "--json")
    assert status == cli_analytics.DRIFT_EXIT_STATUS == 3
    assert err == "emissions: analytics drift in 2 customer(s); `emissions analytics rebuild` repairs it\n"
    report = json.loads(out)
    assert (report["customers"], report["calculations"]) == (4, 5)
    assert report["drifted"] == [
        {"organization": "acme", "environment": "test", "customer": "cust-1", "rows": [
            {"environment": "test", "mode": "ROAD", "business_context": "downstream",
             "expected": {"calculation_count": 1, "activity_tkm": "800", "emissions_kg": "100.176", **NO_PARTS,
                          "first_activity_date": "2026-03-01", "last_activity_date": "2026-03-01"},
             "stored": None},
            {"environment": "test", "mode": "ROAD", "business_context": "upstream",
             "expected": {"calculation_count": 2, "activity_tkm": "1600", "emissions_kg": "200.352", **NO_PARTS,
                          "first_activity_date": "2026-03-01", "last_activity_date": "2026-03-01"},
             "stored": {"calculation_count": 7, "activity_tkm": "1600", "emissions_kg": "1.5", **NO_PARTS,
                        "first_activity_date": "2026-03-01", "last_activity_date": "2026-03-01"}}]},
        {"organization": "globex", "environment": "test", "customer": "idle", "rows": [
            {"environment": "test", "mode": "SEA", "business_context": "downstream", "expected": None,
             "stored": {"calculation_count": 1, "activity_tkm": "2", "emissions_kg": "3", **NO_PARTS,
                        "first_activity_date": "2026-03-01", "last_activity_date": "2026-03-01"}}]},
    ]

    status, out, err = run("analytics", "rebuild", "--json")
    assert (status, err) == (0, "")
    assert json.loads(out)["repaired"] == report["drifted"]
    assert run("analytics", "verify", "--json")[0] == 0
    assert client.get("/v1/customers/cust-1/emissions", headers=acme.headers(), status=200).json == before
    assert CustomerRollup.select().where(CustomerRollup.customer == idle.id).count() == 0
    # A second rebuild has nothing left to repair.
    assert json.loads(run("analytics", "rebuild", "--json")[1])["repaired"] == []


def test_verify_prints_drift_as_readable_lines(run, client, acme):
    post_calculation(client, acme, "k1", status=201)
    CustomerRollup.update(calculation_count=2).execute()
    status, out, _ = run("analytics", "verify")
    assert status == 3
    assert out == ("acme/test/cust-1 ROAD/upstream: expected 1 calculations, 4000 tkm, 500.88 kgCO2e (ttw 0, wtt 0), "
                   "2026-03-01..2026-03-01; stored 2 calculations, 4000 tkm, 500.88 kgCO2e (ttw 0, wtt 0), "
                   "2026-03-01..2026-03-01\n"
                   "checked 1 customers, 1 calculations: 1 drifted\n")


@pytest.mark.on_both
def test_verify_and_rebuild_keep_to_the_given_organization_and_environment(run, client, acme, globex, secret):
    live_key = seed(client, acme, globex, secret)
    CustomerRollup.update(calculation_count=99).execute()  # every rollup row drifts

    def drifted(*scope):
        status, out, _ = run("analytics", "verify", "--json", *scope)
        return sorted((d["organization"], d["environment"]) for d in json.loads(out)["drifted"])

    assert drifted("--org", "acme", "--env", "test") == [("acme", "test")]
    assert drifted("--org", "acme") == [("acme", "live"), ("acme", "test")]
    assert drifted("--env", "live") == [("acme", "live")]
    assert drifted() == [("acme", "live"), ("acme", "test"), ("globex", "test")]

    status, out, _ = run("analytics", "rebuild", "--json", "--org", "acme", "--env", "live")
    assert (status, json.loads(out)["calculations"]) == (0, 1)
    assert drifted() == [("acme", "test"), ("globex", "test")]
    live = client.get("/v1/customers/cust-1/emissions", headers=auth_headers(live_key), status=200).json
    assert live["analytics"]["calculation_count"] == 1
    assert run("analytics", "verify", "--org", "nope") == (1, "", "emissions: no organization with slug nope\n")


@pytest.mark.on_both
def test_calculations_are_streamed_in_batches(client, acme, monkeypatch):
    for number in range(10):
        post_calculation(client, acme, f"k{number}", status=201, external_reference=f"s{number}",
                         activity_date=f"2026-03-{number + 10}")
    monkeypatch.setattr(recount, "STREAM_BATCH", 3)
    batches: list[int] = []
    outcome = recount.verify(progress=batches.append)
    assert batches == [3, 3, 3, 1]
    assert (outcome.customers, outcome.calculations, outcome.drifted) == (1, 10, [])
    expected = recount.expected_rollups(acme.customer.id)
    assert expected == recount.stored_rollups(acme.customer.id)
    totals = expected[("test", "ROAD", "upstream")]
    assert (totals.calculation_count, totals.activity_tkm, totals.emissions_kg) == (10, Decimal(40000),
                                                                                    Decimal("5008.8"))
    assert (totals.first_activity_date.isoformat(), totals.last_activity_date.isoformat()) == (
        "2026-03-10", "2026-03-19")


def test_the_progress_bar_is_drawn_on_stderr_when_asked(run, client, acme):
    for number in range(4):
        post_calculation(client, acme, f"k{number}", status=201, external_reference=f"s{number}")
    status, out, err = run("analytics", "rebuild", "--progress")
    assert status == 0 and out.endswith("0 repaired\n")
    assert err.endswith("\r[" + "#" * 30 + "] 100.0%  4/4 calculations\n")
    assert run("analytics", "verify")[2] == ""  # not a terminal: no bar unless asked


def test_the_progress_bar_redraws_at_most_a_thousand_times():
    stream = io.StringIO()
    bar = ProgressBar(250_000, "calculations", stream=stream, width=10)
    for _ in range(250_000 // 50):
        bar.advance(50)
    bar.finish()
    frames = stream.getvalue().split("\r")[1:]
    assert len(frames) <= 1002
    assert "[#####.....]  50.0%  125,000/250,000 calculations" in frames
    assert frames[-1] == "[##########] 100.0%  250,000/250,000 calculations\n"
    empty = io.StringIO()
    ProgressBar(0, "calculations", stream=empty).finish()
    assert empty.getvalue().endswith("100.0%  0/0 calculations\n")


@pytest.mark.on_both
def test_rebuild_counts_again_when_calculations_arrive_while_it_counts(client, acme, monkeypatch):
    post_calculation(client, acme, "k1", status=201)
    CustomerRollup.update(calculation_count=5).execute()
    original = recount.expected_rollups
    calls = []

    def count_while_a_calculation_arrives(customer_id, progress=None):
        expected = original(customer_id, progress)
        calls.append(recount._counted(expected))
        if len(calls) == 1:  # another connection commits a calculation after this snapshot
            writer = threading.Thread(target=post_calculation, args=(client, acme, "k2"),
                                      kwargs={"status": 201, "external_reference": "s2"})
            writer.start()
            writer.join()
        return expected

    monkeypatch.setattr(recount, "expected_rollups", count_while_a_calculation_arrives)
    outcome = recount.rebuild()
    assert calls == [1, 2]
    assert [recount._counted(drift.expected) for drift in outcome.drifted] == [2]
    monkeypatch.setattr(recount, "expected_rollups", original)
    assert recount.verify().drifted == []
    assert customer_analytics.find_with_analytics(acme.org.id, "test", "cust-1")["analytics"]["calculation_count"] == 2
