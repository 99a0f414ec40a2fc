"""Numbers for people (issue 32): one emissions unit per table or page, chosen from its largest value and
named once in its header, in the workspace and in the CLI's HTML statement; and what the test
environment's notice says about billing."""
from __future__ import annotations

import re
from decimal import Decimal

import pytest

from emissions import figures
from conftest import SIGNED_IN_ON, make_customer

TODAY = SIGNED_IN_ON  # the clock's day while signed in (conftest.signed_in_on_the_day)


@pytest.fixture
def signed_in(signed_in_on_the_day):
    return signed_in_on_the_day


def test_a_unit_is_chosen_from_the_largest_value_and_every_value_is_written_in_it():
    assert figures.co2e_unit(Decimal("542.71"), Decimal("2440")) is figures.TONNES
    assert figures.co2e_unit(Decimal("999.994"), None) is figures.KILOGRAMS
    assert figures.co2e_unit(Decimal("-1000")) is figures.TONNES
    assert figures.co2e_unit() is figures.KILOGRAMS
    assert figures.TONNES.number(Decimal("542.71")) == "0.54" and figures.TONNES.number(Decimal("2440")) == "2.44"
    assert figures.TONNES.text(Decimal("1234567891.5")) == "1,234,567.89 t CO2e"
    assert figures.KILOGRAMS.text(Decimal("8856.45")) == "8,856.45 kgCO2e"
    # A few kilograms in a table of tonnes are not written as nothing.
    assert figures.TONNES.number(Decimal("3")) == "< 0.01" and figures.TONNES.number(Decimal(0)) == "0.00"
    assert figures.TONNES.number(None) == "—"


def table(page_text: str, table_id: str) -> tuple[str, list[str]]:
    """A table's header row and its emissions cells (those carrying data-value)."""
    found = re.search(rf'<table id="{table_id}".*?</table>', page_text, re.S).group(0)
    head = re.search(r"<thead>.*?</thead>", found, re.S).group(0)
    return " ".join(re.sub(r"<[^>]+>", " ", head).split()), re.findall(r'<td class="num" data-value="[^"]*">([^<]*)</td>', found)


def test_each_table_of_the_customer_page_is_in_one_unit_named_in_its_header(client, signed_in, shipped):
    october = client.get("/workspace/customers/cust-1", {"from": "2026-10-01", "to": "2026-10-31"}).text
    head, cells = table(october, "by-mode")
    # Sea 183,540 kg, Air 1,025 kg and Road 36 kg: all three in tonnes, the unit said once above them.
    assert "Emissions t CO2e" in head and len(cells) == 3
    assert all(re.fullmatch(r"[0-9,]+\.[0-9]{2}", cell) for cell in cells), cells
    assert "0.04" in cells  # Road, 36.2 kg
    # November's road legs (38.69 kg) stay in kilograms.
    november = client.get("/workspace/customers/cust-1", {"from": "2026-11-01", "to": "2026-11-30"}).text
    head, cells = table(november, "by-mode")
    assert "Emissions kgCO2e" in head and cells == ["38.69"]
    # No emissions cell of any table carries a unit of its own.
    for page in (october, november):
        body = page.split("<details>")[0]
        assert not re.search(r"<td[^>]*>[^<]*(kgCO2e|t CO2e)</td>", body)


def test_the_printable_statement_writes_each_table_in_one_unit(client, signed_in, shipped):
    text = client.get("/workspace/customers/cust-1", {"from": "2026-10-01", "to": "2026-11-30",
                                                      "format": "statement"}).text
    months = re.search(r'<table id="statement-months">.*?</table>', text, re.S).group(0)
    assert "Emissions (t CO2e)" in months and "TTW (t CO2e)" in months
    assert re.findall(r'<tr><th scope="row">(2026-1[01])</th>', months) == ["2026-10", "2026-11"]
    november_row = re.search(r'<th scope="row">2026-11</th>.*?</tr>', months).group(0)
    assert ">0.04<" in november_row  # 38.69 kg, in the table's tonnes
    assert "kgCO2e" not in months


def test_the_cli_html_statement_writes_numbers_as_the_workspace_does(acme, shipped, emissions):
    status, out, err = emissions("statement", "--org", "acme", "--env", "test", "--customer", "cust-1",
                                 "--from", "2026-10-01", "--to", "2026-11-30", "--format", "html")
    assert status == 0, err
    tables = re.findall(r"<h2>([^<]+)</h2>\s*<table>(.*?)</table>", out, re.S)
    by_heading = {heading: body for heading, body in tables}
    for heading in ("Totals", "By mode", "By month"):
        assert "<th>t CO2e</th><th>TTW t CO2e</th><th>WTT t CO2e</th>" in by_heading[heading], heading
        assert "kgCO2e" not in by_heading[heading]
    # Two decimals with separators (the exact six-place values are in the JSON and the CSV).
    # Every cell in <bdi> (stored text cannot reorder what is beside it), the numbers in it as people read them.
    road = re.search(r"<tr><td><bdi>ROAD</bdi></td><td><bdi>(\d+)</bdi></td><td><bdi>([^<]*)</bdi></td>"
                     r"<td data-value=\"([0-9.]+)\"><bdi>([^<]*)</bdi></td>", by_heading["By mode"])
    calculations, tkm, exact_kg, shown = road.groups()
    assert (calculations, tkm, shown) == ("4", "598.10", "0.07")  # four road calculations, 74.9 kg
    assert round(Decimal(exact_kg), 1) == Decimal("74.9")  # the exact kg beside the figure shown
    sea = re.search(r"<tr><td><bdi>SEA</bdi></td><td><bdi>\d+</bdi></td><td><bdi>([^<]*)</bdi></td>"
                    r"<td data-value=\"[0-9.]+\"><bdi>([^<]*)</bdi></td>", by_heading["By mode"])
    assert sea.groups() == ("11,400,000.00", "183.54")
    assert "Intensity: 0." in out and "kgCO2e/tkm" in out


def test_the_test_environment_says_what_is_true_of_billing(client, signed_in):
    """Issue 32: "Nothing here is billed" stood above "Billable calculations · test 2 … of 10,000"."""
    page = client.get("/workspace").text
    assert "Nothing here is billed" not in page
    assert "Test calculations count toward the monthly test allowance and are never invoiced." in page
    test_card = re.search(r'<h2 class="label">Test calculations[^<]*</h2>.*?</div>', page, re.S).group(0)
    assert "of 10,000 allowed" in test_card and "never invoiced" in test_card and "Billable" not in test_card
    assert re.search(r'<h2 class="label">Billable calculations · live', page)


def test_a_customer_with_nothing_in_a_period_reads_zeros_in_kilograms(client, signed_in):
    make_customer(signed_in.org, "quiet")
    page = client.get("/workspace/customers/quiet", {"period": "last-year"}).text
    assert ">0.00 kgCO2e</p>" in page
