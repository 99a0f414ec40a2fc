"""The statement as a printable page opened from disk (the CLI's `--format html`), rendered from
templates/statement_file.tpl as the workspace renders its pages: its numbers written for people as
the workspace writes them, a self-contained style and a policy in a <meta>, since no header applies."""
from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import bottle

from .. import figures
from .. import jsoncodec

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
STYLE = ("@page { size: A4; margin: 18mm } body { font: 10pt sans-serif } "
         "table { border-collapse: collapse; margin: 0 0 12pt } td, th { border: 1px solid #999; padding: 2pt 6pt; "
         "text-align: right } td:first-child, th:first-child { text-align: left }")
# The workspace's policy, for a page opened from disk where no header applies: nothing loads or runs
# but its own inline stylesheet, named by its hash (frame-ancestors has no effect in a <meta>).
POLICY = ("default-src 'none'; style-src 'sha256-" + base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()
          + "'; script-src 'none'; img-src 'none'; form-action 'none'; base-uri 'none'")


class Co2e(Decimal):
    """Emissions in kg in a table of the statement, which writes them in the table's unit."""


@dataclass(frozen=True)
class Cell:
    """A table cell's text and, for emissions, the exact kg it carries in data-value."""

    text: str
    exact: str | None = None


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[Cell]]


def number(value) -> str:
    return "" if value is None else figures.number_text(value)


def exact(value) -> str:
    return "—" if value is None else jsoncodec.decimal_text(value)


def table(headers: list[str], rows: list[list]) -> Table:
    """Each table writes its emissions (Co2e cells) in one unit, from its largest, named in the headers
    that say kgCO2e; counts get thousands separators. A Co2e cell carries its exact kg in data-value, by
    which the rows add up to the total where the rounded figures may miss it by a hundredth."""
    unit = figures.co2e_unit(*(cell for row in rows for cell in row if isinstance(cell, Co2e)))

    def cell_of(value) -> Cell:
        if isinstance(value, Co2e):
            return Cell(unit.number(value), exact(value))
        return Cell(f"{value:,}" if isinstance(value, (int, Decimal)) else str(value))

    return Table([header.replace("kgCO2e", unit.name) for header in headers],
                 [[cell_of(value) for value in row] for row in rows])


def _aggregate_row(name: str, totals: dict) -> list:
    emissions = totals["emissions"]
    return [name, totals["calculation_count"], number(totals["activity"]["value"]), Co2e(emissions["value"]),
            Co2e(emissions["breakdown"]["ttw"]), Co2e(emissions["breakdown"]["wtt"]),
            Co2e(emissions["breakdown"]["unattributed"])]


def _hubs_rows(found: dict) -> list[list]:
    """The hubs' row below the modes: no calculations and no tkm, so every column still adds up."""
    hubs = found.get("hubs")
    if not hubs:
        return []
    emissions = hubs["emissions"]
    return [[f"Hubs ({hubs['count']}, {number(hubs['activity']['value'])} t handled)", "", "",
             Co2e(emissions["value"]), Co2e(emissions["breakdown"]["ttw"]),
             Co2e(emissions["breakdown"]["wtt"]), Co2e(emissions["breakdown"]["unattributed"])]]


def _used_by(factor: dict) -> list:
    return [factor["calculation_count"] or ("" if factor.get("hub_count") else 0), factor.get("hub_count", "")]


def statement(found: dict) -> str:
    """The statement (statements.statement) as a printable page (A4)."""
    totals = found["totals"]
    columns = ["", "calculations", "tkm", "kgCO2e", "TTW kgCO2e", "WTT kgCO2e", "not split kgCO2e"]
    counts = [totals["shipment_count"], totals["single_calculation_count"], totals["calculation_count"],
              found["hubs"]["count"] if "hubs" in found else 0]
    tables = {
        "totals": table(columns, [_aggregate_row("Total", totals)]),
        "counts": table(["", "shipments", "single calculations", "calculations", "hubs"], [["Count", *counts]]),
        "modes": table(columns, [_aggregate_row(mode, numbers) for mode, numbers in found["by_mode"].items()]
                       + _hubs_rows(found)),
        "months": table(columns, [_aggregate_row(month["month"], month) for month in found["by_month"]]),
        "factors": table(["reference", "version", "name", "source", "calculations", "hubs"],
                         [[factor["reference"], factor["version"], factor["name"], factor["source"],
                           *_used_by(factor)] for factor in found["factors"]]),
    }
    return bottle.template("statement_file", template_lookup=[str(TEMPLATES)], statement=found, tables=tables,
                           style=STYLE, policy=POLICY, intensity=exact(totals["intensity"]["value"]), exact=exact)
