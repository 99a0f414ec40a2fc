"""The workspace by activity date (issue 22): the customer page's period picker, its numbers (equal to the
API's period analytics), chart, CSV and printable statement; the overview and the list by activity date."""
from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest

from emissions import jsoncodec
from emissions import statements
from emissions import workspace
from emissions.exports import csv as export_csv
from emissions.workspace import insights
from conftest import SIGNED_IN_ON, make_customer
from helpers import sign_in

TODAY = SIGNED_IN_ON  # the clock's day while signed in (conftest.signed_in_on_the_day)


@pytest.fixture
def signed_in(signed_in_on_the_day):
    return signed_in_on_the_day


def shown_period(page) -> tuple[str, str]:
    found = re.search(r'id="period" data-from="([^"]*)" data-to="([^"]*)"', page.text)
    return found.group(1), found.group(2)


@pytest.mark.parametrize("today, choice, start, end", [
    ("2026-11-25", "", "2026-11-01", "2026-11-30"),
    ("2026-12-04", "last-and-this-month", "2026-11-01", "2026-12-31"),
    ("2026-01-10", "last-and-this-month", "2025-12-01", "2026-01-31"),
    ("2026-11-25", "this-month", "2026-11-01", "2026-11-30"),
    ("2026-11-25", "last-month", "2026-10-01", "2026-10-31"),
    ("2026-11-25", "this-quarter", "2026-10-01", "2026-12-31"),
    ("2026-11-25", "last-quarter", "2026-07-01", "2026-09-30"),
    ("2026-11-25", "this-year", "2026-01-01", "2026-12-31"),
    ("2026-11-25", "last-year", "2025-01-01", "2025-12-31"),
    ("2026-11-25", "all", "", ""),
    ("2026-01-10", "last-month", "2025-12-01", "2025-12-31"),
    ("2026-02-28", "last-quarter", "2025-10-01", "2025-12-31"),
    ("2024-02-10", "this-month", "2024-02-01", "2024-02-29"),
    ("2026-05-31", "this-quarter", "2026-04-01", "2026-06-30"),
])
def test_each_period_of_the_picker_is_its_exact_activity_dates(client, signed_in, fixed_clock, today, choice, start,
                                                               end):
    fixed_clock(dt.datetime.fromisoformat(today + "T23:59:59+00:00"))
    sign_in(client)  # a session of that day (one from another day has not begun or has ended)
    page = client.get("/workspace/customers/cust-1", {"period": choice} if choice else {})
    assert shown_period(page) == (start, end)
    assert f'<option value="{choice or "this-month"}" selected>' in page.text


def test_a_custom_period_takes_from_and_to_and_a_bad_one_is_refused(client, signed_in):
    page = client.get("/workspace/customers/cust-1", {"period": "custom", "from": "2026-09-15", "to": "2026-10-20"})
    assert shown_period(page) == ("2026-09-15", "2026-10-20")
    assert shown_period(client.get("/workspace/customers/cust-1", {"from": "2026-09-15"})) == ("2026-09-15", "")
    # The form sends the custom dates it shows with any choice: a named period does not use them.
    assert shown_period(client.get("/workspace/customers/cust-1", {"period": "last-year", "from": "2026-09-15",
                                                                   "to": "2026-10-20"})) == ("2025-01-01", "2025-12-31")
    for query, message in (({"from": "15/09/2026"}, "The “from” date must be written YYYY-MM-DD."),
                           ({"from": "2026-10-02", "to": "2026-10-01"}, "The “from” date is after the “to” date."),
                           ({"period": "fortnight"}, "Unknown period")):
        refused = client.get("/workspace/customers/cust-1", query, status=400)
        assert message in refused.text
        client.get("/workspace/customers/cust-1", {**query, "format": "csv"}, status=400)


def page_figures(page) -> dict:
    """The exact values the page carries beside the numbers it shows."""
    return {"count": re.search(r'data-field="calculation_count" data-value="([^"]*)"', page.text).group(1),
            "emissions": re.search(r'data-field="emissions" data-value="([^"]*)"', page.text).group(1),
            "activity": re.search(r'data-field="activity" data-value="([^"]*)"', page.text).group(1),
            "by_mode": dict(re.findall(r'<tr data-mode="([A-Z]+)">.*?data-value="([^"]*)"', page.text)),
            "by_context": dict(re.findall(r'<tr data-context="([a-z]+)">.*?data-value="([^"]*)"', page.text)),
            "months": dict(re.findall(r'data-month="([0-9-]+)" data-kg="([^"]*)"', page.text))}


@pytest.mark.on_both
@pytest.mark.parametrize("query", ["from=2026-09-01&to=2026-09-30", "from=2026-08-15&to=2026-11-10", ""])
def test_the_pages_figures_are_the_apis_period_analytics_to_the_last_decimal(client, signed_in, shipped, query):
    api = jsoncodec.loads(client.get(f"/v1/customers/cust-1/emissions?{query}", headers=signed_in.headers()).body)
    analytics = api["analytics"]
    page = client.get(f"/workspace/customers/cust-1?{query or 'period=all'}")
    text = lambda value: jsoncodec.decimal_text(value)  # noqa: E731
    assert page_figures(page) == {
        "count": str(analytics["calculation_count"]), "emissions": text(analytics["emissions"]["value"]),
        "activity": text(analytics["activity"]["value"]),
        "by_mode": {mode: text(totals["emissions"]["value"]) for mode, totals in analytics["by_mode"].items()},
        "by_context": {name: text(totals["emissions"]["value"])
                       for name, totals in analytics["by_business_context"].items()},
        "months": {month["month"]: str(month["emissions"]["value"]) for month in analytics["by_month"]}}
    assert analytics["by_mode"]  # the periods chosen hold calculations
    # The chart's parts of each month add up to the month.
    for month, kg in page_figures(page)["months"].items():
        block = re.search(rf'data-month="{month}".*?</g>', page.text).group(0)
        assert "class=\"part" in block and Decimal(kg) > 0


def test_numbers_have_thousands_separators_and_tonnes_from_1000_kg(client, signed_in, shipped):
    assert insights.co2e_text(Decimal("999.994")) == "999.99 kgCO2e"
    assert insights.co2e_text(Decimal("1000")) == "1.00 t CO2e"
    assert insights.co2e_text(Decimal("56979.302006")) == "56.98 t CO2e"
    assert insights.co2e_text(Decimal("1234567891.5")) == "1,234,567.89 t CO2e"
    assert insights.number_text(Decimal("2945934.7")) == "2,945,934.70"
    page = client.get("/workspace/customers/cust-1", {"period": "all"})
    analytics = jsoncodec.loads(client.get("/v1/customers/cust-1/emissions", headers=signed_in.headers()).body)["analytics"]
    total = analytics["emissions"]["value"]
    assert total >= 1000
    assert f">{insights.co2e_text(total)}</p>" in page.text and " t CO2e" in page.text
    assert f">{insights.number_text(analytics['activity']['value'])}</span>" in page.text
    # Separate tables: a business context is never listed as a mode.
    modes = re.findall(r'<tr data-mode="([A-Za-z]+)">', page.text)
    assert modes == list(analytics["by_mode"]) and "upstream" not in modes
    assert re.findall(r'<tr data-context="([a-z]+)">', page.text) == list(analytics["by_business_context"])
    shown = re.sub(r"<[^>]+>", " ", page.text.split('<details>')[0])
    assert not re.search(r"\d{4,}\.\d", shown.replace(",", "X"))  # no raw decimal without separators


@pytest.mark.on_both
def test_the_csv_download_is_the_statement_csv_of_the_period(client, signed_in, shipped):
    download = client.get("/workspace/customers/cust-1", {"from": "2026-09-01", "to": "2026-10-31",
                                                          "format": "csv"})
    assert download.headers["Content-Type"].startswith("text/csv")
    assert download.headers["Content-Disposition"] == \
        'attachment; filename="statement-cust-1-test-2026-09-01-to-2026-10-31.csv"'
    expected = "".join(export_csv.calculations(statements.calculation_rows(
        signed_in.org.id, "test", "cust-1", dt.date(2026, 9, 1), dt.date(2026, 10, 31))))
    assert download.text == expected
    assert len(expected.strip().split("\n")) == 1 + 7  # the header and the seven shipments of September-October
    page = client.get("/workspace/customers/cust-1", {"from": "2026-09-01", "to": "2026-10-31"})
    assert 'href="/workspace/customers/cust-1?period=custom&amp;from=2026-09-01&amp;to=2026-10-31&amp;format=csv"' \
        in page.text


def test_the_printable_statement_names_the_organization_customer_period_totals_and_sources(client, signed_in,
                                                                                          shipped):
    page = client.get("/workspace/customers/cust-1", {"period": "last-quarter"})
    link = re.search(r'href="([^"]*format=statement)"', page.text).group(1).replace("&amp;", "&")
    statement = client.get(link)
    found = statements.statement(signed_in.org.id, "test", "cust-1", dt.date(2026, 7, 1), dt.date(2026, 9, 30))
    text = statement.text
    assert "Acme" in text and "<bdi>Customer cust-1</bdi> (cust-1)" in text and "Activity dates 2026-07-01 to 2026-09-30" in text
    assert f'data-value="{jsoncodec.decimal_text(found["totals"]["emissions"]["value"])}"' in text
    assert re.findall(r'<th scope="row">(\d{4}-\d{2})</th>', text) == ["2026-08", "2026-09"]
    assert re.findall(r'<table id="statement-modes">.*?</table>', text, re.S)[0].count('<th scope="row">') == 3
    assert "ISO 14083:2023" in text and "road-default" in text and "sea-default" in text
    assert "@page" not in text  # print rules live in the stylesheet (the CSP allows no inline style)


def test_a_customer_with_no_calculations_in_the_period_shows_zeros_not_an_error(client, signed_in):
    make_customer(signed_in.org, "quiet")
    page = client.get("/workspace/customers/quiet", {"period": "last-year"})
    assert "No calculations in this period." in page.text and "No emissions in this period." in page.text
    assert client.get("/workspace/customers/quiet", {"period": "last-year", "format": "statement"}).status_int == 200


def kg_of(bodies, month: str) -> Decimal:
    return sum((body["emissions"]["value"] for body in bodies if body["activity_date"].startswith(month)), Decimal(0))


def test_the_overview_counts_emissions_by_activity_date_and_billing_by_creation(client, signed_in, shipped):
    page = client.get("/workspace", {"period": "this-month"})
    assert f'data-month-kg="{jsoncodec.decimal_text(kg_of(shipped, "2026-11"))}"' in page.text
    assert "Emissions by activity date" in page.text and "Billable calculations" in page.text
    assert "billing counts by creation month" in page.text


def overview_months(page) -> dict:
    return dict(re.findall(r'<li data-month="([0-9-]+)" data-kg="([^"]*)"', page.text))


def test_the_overview_shows_the_month_being_closed_beside_the_current_one_and_any_period(client, signed_in, shipped,
                                                                                       fixed_clock):
    """Issue 32: on 4 December the overview showed only December (0 kg), and November could not be picked."""
    fixed_clock(dt.datetime(2026, 12, 4, 9, 0, tzinfo=dt.timezone.utc))
    sign_in(client)  # a session of that day
    page = client.get("/workspace")
    assert re.search(r'id="emissions" data-from="([^"]*)" data-to="([^"]*)"', page.text).groups() == (
        "2026-11-01", "2026-12-31")
    assert '<option value="last-and-this-month" selected>' in page.text
    november = jsoncodec.decimal_text(kg_of(shipped, "2026-11"))
    assert overview_months(page) == {"2026-11": november, "2026-12": "0"}
    assert f'data-month-kg="{november}"' in page.text
    # Any period of the customer page's picker, named or custom.
    october = client.get("/workspace", {"period": "custom", "from": "2026-10-01", "to": "2026-10-31"})
    assert overview_months(october) == {"2026-10": jsoncodec.decimal_text(kg_of(shipped, "2026-10"))}
    everything = client.get("/workspace", {"period": "all"})
    assert f'data-month-kg="{jsoncodec.decimal_text(kg_of(shipped, ""))}"' in everything.text
    assert set(overview_months(everything)) == {body["activity_date"][:7] for body in shipped}
    refused = client.get("/workspace", {"from": "2026-10-02", "to": "2026-10-01"}, status=400)
    assert "The “from” date is after the “to” date." in refused.text


@pytest.mark.on_both
def test_the_calculation_list_filters_by_activity_date(client, signed_in, shipped):
    page = client.get("/workspace/calculations", {"activity_from": "2026-10-01", "activity_to": "2026-10-31"})
    listed = set(re.findall(r'href="/workspace/calculations/([0-9a-f-]{36})"', page.text))
    assert listed == {body["id"] for body in shipped if body["activity_date"].startswith("2026-10")}
    download = client.get("/workspace/calculations.csv", {"activity_from": "2026-11-01"})
    assert len(download.text.strip().split("\n")) == 1 + 3
    refused = client.get("/workspace/calculations", {"activity_from": "2026-10-02", "activity_to": "2026-10-01"},
                         status=400)
    assert "The activity “from” date is after the “to” date" in refused.text
    assert "must be written YYYY-MM-DD" in client.get("/workspace/calculations", {"activity_to": "x"}, status=400).text


def test_a_failing_csv_query_is_the_error_page_not_a_cut_download(client, signed_in, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")
        yield  # a generator, as the real one

    monkeypatch.setattr(statements, "calculation_rows", broken)
    failed = client.get("/workspace/customers/cust-1", {"period": "all", "format": "csv"}, status=500)
    assert failed.headers["Content-Type"].startswith("text/html") and "Content-Disposition" not in failed.headers
    assert "Something went wrong" in failed.text
