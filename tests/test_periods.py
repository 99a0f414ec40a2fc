"""A customer's analytics over a period of activity dates, and by month (issue 22), from the day and month
rollups; exact, equal to the sums of the stored calculations, and covered by verify and rebuild."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import threading
from decimal import Decimal

import pytest

from emissions import analytics as customer_analytics
from emissions.rollups import recount
from emissions import customers
from emissions import jsoncodec
from emissions import migrations
from emissions import models
from emissions import periods
from emissions.models import CustomerPeriodRollup
from conftest import EMISSIONS, SHIPMENTS, post_calculation
from helpers import expected_analytics


def analytics(client, persona, query: str = "") -> dict:
    response = client.get("/v1/customers/cust-1/emissions" + (f"?{query}" if query else ""),
                          headers=persona.headers(), status=200)
    return jsoncodec.loads(response.body)["analytics"]


PERIODS = [
    ("2026-10-01", "2026-10-31"),  # one whole month
    ("2026-09-15", "2026-11-10"),  # partial, whole, partial
    ("2026-09-02", "2026-09-29"),  # inside one month
    ("2026-08-31", "2026-09-01"),  # across a month's end
    ("2026-09-01", "2026-11-30"),  # whole months only
    ("2026-10-01", None), (None, "2026-09-30"), ("2026-10-18", "2026-10-30"),  # open, and a period without data
    ("2025-01-01", "2027-12-31"), ("2026-10-01", "2026-10-01"), ("2026-12-01", "2026-12-31"),
]


@pytest.mark.on_both
def test_every_total_is_over_the_period_and_equal_to_the_calculations_sums(client, acme, shipped):
    for start, end in PERIODS:
        query = "&".join(f"{name}={value}" for name, value in (("from", start), ("to", end)) if value)
        assert analytics(client, acme, query) == expected_analytics(shipped, start, end), (start, end)


@pytest.mark.on_both
def test_october_counts_only_october(client, acme, shipped):
    october = analytics(client, acme, "from=2026-10-01&to=2026-10-31")
    assert october["calculation_count"] == 4
    assert [month["month"] for month in october["by_month"]] == ["2026-10"]
    assert (october["first_activity_date"], october["last_activity_date"]) == ("2026-10-01", "2026-10-31")
    assert october["period"] == {"from": "2026-10-01", "to": "2026-10-31"}
    breakdown = october["emissions"]["breakdown"]
    assert breakdown["ttw"] + breakdown["wtt"] + breakdown["unattributed"] == october["emissions"]["value"]
    assert breakdown["ttw"] > 0


@pytest.mark.on_both
def test_the_lifetime_answer_is_todays_with_period_and_by_month_added(client, acme, shipped):
    response = client.get("/v1/customers/cust-1/emissions", headers=acme.headers(), status=200)
    before = jsoncodec.dumps(customer_analytics.find_with_analytics(acme.org.id, "test", "cust-1"))  # without by_month
    assert before.endswith("}}")
    assert response.text.startswith(before[:-2] + ',"period":{"from":null,"to":null},"by_month":[')
    assert jsoncodec.loads(response.body)["analytics"] == expected_analytics(shipped, None, None)


def test_the_period_rows_are_one_day_row_and_one_month_row_per_day_mode_and_context(client, acme, shipped):
    rows = list(CustomerPeriodRollup.select().where(CustomerPeriodRollup.span == "month"))
    assert sum(row.calculation_count for row in rows) == len(SHIPMENTS)
    assert all(row.activity_date.day == 1 for row in rows)
    october_road = CustomerPeriodRollup.get(span="day", activity_date=dt.date(2026, 10, 1), mode="ROAD")
    assert october_road.calculation_count == 2


@pytest.mark.on_both
def test_verify_finds_a_drifted_period_row_and_rebuild_repairs_it(client, acme, shipped):
    assert recount.verify().drifted == []
    row = CustomerPeriodRollup.get(span="day", activity_date=dt.date(2026, 10, 17))
    row.emissions_kg += Decimal("0.000001")
    row.save()
    CustomerPeriodRollup.delete().where(CustomerPeriodRollup.span == "month",
                                        CustomerPeriodRollup.activity_date == dt.date(2026, 11, 1)).execute()
    drifted = recount.verify().drifted
    assert [drift.customer.reference for drift in drifted] == ["cust-1"]
    rows = drifted[0].to_dict()["rows"]
    assert [(r["span"], r["activity_date"], r["mode"]) for r in rows] == [
        ("month", "2026-11-01", "ROAD"), ("day", "2026-10-17", "SEA")]
    assert rows[0]["stored"] is None and rows[0]["expected"]["calculation_count"] == 2
    assert recount.verify().calculations == len(SHIPMENTS)  # each calculation counted once
    recount.rebuild()
    assert recount.verify().drifted == []
    assert analytics(client, acme, "from=2026-10-01") == expected_analytics(shipped, "2026-10-01", None)


@pytest.mark.on_both
def test_verify_finds_a_drifted_organization_day_row_and_rebuild_repairs_it(client, acme, shipped):
    days = models.OrganizationPeriodRollup
    row = days.get(activity_date=dt.date(2026, 10, 17))
    row.emissions_kg += Decimal("0.000001")
    row.save()
    days.delete().where(days.activity_date == dt.date(2026, 11, 30)).execute()
    days.create(organization=acme.org.id, environment="test", span="day", activity_date=dt.date(2026, 12, 1),
                mode="SEA", business_context="upstream", calculation_count=1, activity_tkm=Decimal(1),
                emissions_kg=Decimal(1), emissions_ttw_kg=Decimal(0), emissions_wtt_kg=Decimal(0))
    drifted = recount.verify().drifted
    assert [(drift.customer, drift.organization, drift.environment) for drift in drifted] == [(None, "acme", "test")]
    rows = drifted[0].to_dict()["rows"]
    assert [(r["activity_date"], r["mode"], r["expected"] and r["expected"]["emissions_kg"],
             r["stored"] and r["stored"]["emissions_kg"]) for r in rows] == [
        ("2026-11-30", "ROAD", "1.12698", None), ("2026-10-17", "SEA", "183540", "183540.000001"),
        ("2026-12-01", "SEA", None, "1")]
    assert [d.to_dict() for d in recount.rebuild().drifted] == [drifted[0].to_dict()]
    assert recount.verify().drifted == []
    assert days.get(activity_date=dt.date(2026, 10, 17)).emissions_kg == Decimal("183540")


def test_the_cli_verify_names_a_drifted_organization_day_row(client, acme, shipped, emissions):
    models.OrganizationPeriodRollup.delete().where(
        models.OrganizationPeriodRollup.activity_date == dt.date(2026, 11, 30)).execute()
    status, out, err = emissions("analytics", "verify", "--no-progress")
    assert status == 3
    assert ("acme/test/(organization) ROAD/upstream day 2026-11-30: expected 1 calculations, 9 tkm, 1.12698 kgCO2e"
            " (ttw 0, wtt 0); stored no row") in out
    assert err == "emissions: analytics drift in 1 organization(s); `emissions analytics rebuild` repairs it\n"
    assert out.rstrip().endswith("0 drifted, 1 organization(s) drifted")
    report = json.loads(emissions("analytics", "verify", "--no-progress", "--json")[1])
    assert report["drifted"] == []  # customers only: a script reading each drift's customer keeps working
    assert [(d["organization"], d["customer"]) for d in report["organizations_drifted"]] == [("acme", None)]
    status, out, err = emissions("analytics", "rebuild", "--no-progress", "--json")
    assert status == 0 and json.loads(out)["organizations_repaired"] == report["organizations_drifted"]
    assert emissions("analytics", "verify", "--no-progress")[0] == 0


@pytest.mark.on_both
def test_the_migration_builds_the_period_rows_from_stored_calculations(client, acme, shipped, database_url):
    CustomerPeriodRollup.delete().execute()
    database = models.db.obj
    database.execute_sql("DROP TABLE customer_period_rollup")
    database.execute_sql("DELETE FROM migration_history WHERE name = '0009_customer_period_rollups'")
    assert migrations.run(database) == ["0009_customer_period_rollups"]
    assert recount.verify().drifted == []
    for start, end in PERIODS[:3]:
        assert analytics(client, acme, f"from={start}&to={end}") == expected_analytics(shipped, start, end)


@pytest.mark.parametrize("start, end, months, before, after", [
    ("2026-10-01", "2026-10-31", ("2026-10-01", "2026-10-01"), None, None),
    ("2026-09-15", "2026-11-10", ("2026-10-01", "2026-10-01"), ("2026-09-15", "2026-09-30"),
     ("2026-11-01", "2026-11-10")),
    ("2026-09-02", "2026-09-29", None, ("2026-09-02", "2026-09-29"), None),
    ("2026-09-30", "2026-10-01", None, ("2026-09-30", "2026-10-01"), None),
    ("2026-01-01", "2026-12-31", ("2026-01-01", "2026-12-01"), None, None),
    ("2024-02-29", "2024-03-31", ("2024-03-01", "2024-03-01"), ("2024-02-29", "2024-02-29"), None),
    ("0001-01-01", "9999-12-31", ("0001-01-01", "9999-12-01"), None, None),
    ("9999-12-02", "9999-12-30", None, ("9999-12-02", "9999-12-30"), None),
])
def test_a_period_is_whole_months_and_the_days_around_them(start, end, months, before, after):
    def dates(pair):
        return periods.NO_DAYS if pair is None else tuple(dt.date.fromisoformat(day) for day in pair)

    assert periods.ranges(dt.date.fromisoformat(start), dt.date.fromisoformat(end)) == (
        dates(months), dates(before), dates(after))


def test_the_cli_verify_names_a_drifted_period_row(client, acme, shipped, emissions):
    CustomerPeriodRollup.delete().where(CustomerPeriodRollup.span == "day",
                                        CustomerPeriodRollup.activity_date == dt.date(2026, 11, 30)).execute()
    status, out, err = emissions("analytics", "verify", "--no-progress")
    assert status == 3
    assert ("acme/test/cust-1 ROAD/upstream day 2026-11-30: expected 1 calculations, 9 tkm, 1.12698 kgCO2e"
            " (ttw 0, wtt 0); stored no row") in out
    status, out, err = emissions("analytics", "rebuild", "--no-progress")
    assert status == 0 and "1 repaired" in out
    assert emissions("analytics", "verify", "--no-progress")[0] == 0


# --- an answer kept by this process is never older than the database -------------------------------

def in_another_thread(work) -> None:
    """Run work() on a thread of its own, and so on a database connection of its own."""
    failures = []

    def run():
        try:
            work()
        except BaseException as error:  # handed to the test's own thread
            failures.append(error)
        finally:
            models.db.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not failures, failures


@pytest.mark.on_both
def test_a_calculation_written_on_another_connection_is_in_the_next_answer(client, acme, shipped):
    before, november = analytics(client, acme), analytics(client, acme, "from=2026-11-01")
    assert (analytics(client, acme), analytics(client, acme, "from=2026-11-01")) == (before, november)  # kept
    in_another_thread(lambda: post_calculation(client, acme, "elsewhere", status=201, activity_date="2026-11-30",
                                               external_reference="elsewhere"))
    after = analytics(client, acme)
    assert after["calculation_count"] == before["calculation_count"] + 1
    assert [month["calculation_count"] for month in after["by_month"]] == [
        month["calculation_count"] + (month["month"] == "2026-11") for month in before["by_month"]]
    assert analytics(client, acme, "from=2026-11-01")["calculation_count"] == november["calculation_count"] + 1


@pytest.mark.on_both
def test_a_change_made_by_another_process_is_in_the_next_answer(client, acme, shipped, config):
    path = "/v1/customers/cust-1/emissions"
    assert client.get(path, headers=acme.headers()).json["name"] != "Renamed Ltd"
    subprocess.run([str(EMISSIONS), "customer", "update", "--org", acme.org.slug, "--env", "test", "--reference",
                    "cust-1", "--name", "Renamed Ltd"], env={**os.environ, "DATABASE_URL": config.database_url},
                   check=True, capture_output=True)
    assert client.get(path, headers=acme.headers()).json["name"] == "Renamed Ltd"


@pytest.mark.on_both
def test_a_rebuild_that_changes_only_month_rows_is_in_the_next_answer(client, acme, shipped):
    """The lifetime rows stay as they were; by_month follows the month rows."""
    months = analytics(client, acme)["by_month"]

    def drift():
        CustomerPeriodRollup.update(calculation_count=CustomerPeriodRollup.calculation_count + 5).where(
            CustomerPeriodRollup.span == "month", CustomerPeriodRollup.activity_date == dt.date(2026, 11, 1)).execute()

    in_another_thread(drift)
    drifted = analytics(client, acme)["by_month"]
    assert [month["calculation_count"] for month in drifted] == [
        month["calculation_count"] + (5 if month["month"] == "2026-11" else 0) for month in months]
    in_another_thread(recount.rebuild)
    assert analytics(client, acme)["by_month"] == months
