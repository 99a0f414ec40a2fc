"""Customer analytics: a customer's rollup rows (emissions/rollups/) summarised as the API shows them."""
from __future__ import annotations

import datetime as dt
from typing import Iterable

from . import rollups
from .models import HUB, MODES, customer_view
from .rollups import EXACT


# --- the analytics, read from the rollup -------------------------------------------------------

def _aggregate(sums: rollups.Sums) -> dict:
    return {"calculation_count": sums.calculation_count,
            "activity": {"value": sums.activity_tkm, "unit": "tkm"},
            "emissions": _emissions(sums)}


def _emissions(sums: rollups.Sums) -> dict:
    """Emissions with their parts: ttw and wtt over the calculations that have them, and the
    emissions of those that do not (unattributed), so that the three add up to value exactly."""
    unattributed = EXACT.subtract(EXACT.subtract(sums.emissions_kg, sums.emissions_ttw_kg), sums.emissions_wtt_kg)
    return {"value": sums.emissions_kg, "unit": "kgCO2e",
            "breakdown": {"ttw": sums.emissions_ttw_kg, "wtt": sums.emissions_wtt_kg, "unattributed": unattributed}}


def find_with_analytics(organization_id: int, environment: str, reference: str) -> dict | None:
    """The customer with this reference and its analytics, as the API shows it, or None, in one statement."""
    found = rollups.customer_with_rollups(organization_id, environment, reference)
    return None if found is None else lifetime_view(environment, reference, *found)


def lifetime_view(environment: str, reference: str, customer: rollups.CustomerPart,
                  rows: list[rollups.RollupRow]) -> dict:
    """The customer with its lifetime analytics, from its rollup rows."""
    first = min((row.first_activity_date for row in rows), default=None)
    last = max((row.last_activity_date for row in rows), default=None)
    return customer_view(reference, customer.name, customer.status, customer.country_code,
                         summarize(environment, rows, first, last))


def summarize(environment: str, rows: Iterable, first: dt.date | None = None, last: dt.date | None = None) -> dict:
    """Totals, per-mode and per-context aggregates from rollup-like rows (their count and sums by mode
    and business context), with the first and last activity date given."""
    by_mode: dict[str, rollups.Sums] = {}
    by_context: dict[str, rollups.Sums] = {}
    total = rollups.Sums()
    for row in rows:
        of_mode = by_mode.setdefault(row.mode, rollups.Sums())
        for sums in (of_mode, by_context.setdefault(row.business_context, rollups.Sums()), total):
            if row.mode == HUB and sums is not of_mode:  # shipments: hubs add only their emissions
                sums.merge(row, rollups.EMISSIONS, counted=False)
            else:
                sums.merge(row)
    return {
        "environment": environment,
        "calculation_count": total.calculation_count,
        "activity": {"value": total.activity_tkm, "unit": "tkm"},
        "emissions": _emissions(total),
        "by_mode": {mode: _aggregate(by_mode[mode]) for mode in MODES if mode in by_mode},
        "by_business_context": {context: _aggregate(by_context[context])
                                for context in ("upstream", "downstream") if context in by_context},
        "first_activity_date": first.isoformat() if first else None,
        "last_activity_date": last.isoformat() if last else None,
        **_hubs(by_mode.get(HUB)),
    }


def _hubs(sums: rollups.Sums | None) -> dict:
    """Shipments: the `hubs` block (present when the customer's shipments have hubs); activity in tonnes handled."""
    if sums is None:
        return {}
    return {"hubs": {"count": sums.calculation_count, "activity": {"value": sums.activity_tkm, "unit": "tonne"},
                     "emissions": _emissions(sums)}}
