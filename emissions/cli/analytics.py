"""`emissions analytics verify|rebuild`: the customer analytics rollups checked against the calculations."""
from __future__ import annotations

import sys

from ..rollups import recount
from .commands import ENVIRONMENTS, argument, arguments, group
from .render import ProgressBar, emit, warn
from .values import organization

DRIFT_EXIT_STATUS = 3  # verify found drift: distinct from 1 (error) and 2 (usage)

rollups = group("analytics", "customer analytics rollups")

over_the_rollups = arguments(
    argument("--org", help="only this organization (default: all)"),
    argument("--env", choices=ENVIRONMENTS, help="only this environment (default: both)"),
    argument("--progress", dest="progress", action="store_true", default=None,
             help="show a progress bar on stderr (default: when stderr is a terminal)"),
    argument("--no-progress", dest="progress", action="store_false"))


def run_check(args, check):
    """Run recount.verify or .rebuild over --org/--env, with a progress bar when asked or on a tty."""
    organization_id = organization(args.org).id if args.org else None
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    bar = ProgressBar(recount.count_calculations(organization_id, args.env), "calculations") if show else None
    outcome = check(organization_id, args.env, progress=bar.advance if bar else None)
    if bar:
        bar.finish()
    return outcome


def drift_lines(drifts: list[dict]) -> list[str]:
    def totals(row):
        if row is None:
            return "no row"
        # A period rollup row (span day or month) has no first and last date of its own.
        dates = f", {row['first_activity_date']}..{row['last_activity_date']}" if "first_activity_date" in row else ""
        return (f"{row['calculation_count']} calculations, {row['activity_tkm']} tkm, {row['emissions_kg']} kgCO2e "
                f"(ttw {row['emissions_ttw_kg']}, wtt {row['emissions_wtt_kg']}){dates}")

    def rollup(r):
        return f"{r['mode']}/{r['business_context']}" + (f" {r['span']} {r['activity_date']}" if "span" in r else "")

    def owner(d):  # a customer, or (customer null) the organization's own day rows
        return f"{d['organization']}/{d['environment']}/" + (d["customer"] if d["customer"] is not None
                                                              else "(organization)")
    return [f"{owner(d)} {rollup(r)}: "
            f"expected {totals(r['expected'])}; stored {totals(r['stored'])}" for d in drifts for r in d["rows"]]


def emit_check(args, outcome, listed_as: str) -> list[dict]:
    """Print a verify or rebuild outcome: its drifted customers listed under `listed_as`, the
    organizations whose own day rows drifted under `organizations_<listed_as>`; both returned."""
    listed = [drift.to_dict() for drift in outcome.drifted]
    customers = [drift for drift in listed if drift["customer"] is not None]
    organizations = [drift for drift in listed if drift["customer"] is None]
    summary = (f"checked {outcome.customers:,} customers, {outcome.calculations:,} calculations: "
               f"{len(customers)} {listed_as}" + (f", {len(organizations)} organization(s) {listed_as}"
                                                  if organizations else ""))
    emit(args, {"customers": outcome.customers, "calculations": outcome.calculations, listed_as: customers,
                f"organizations_{listed_as}": organizations},
         "\n".join(drift_lines(listed) + [summary]))
    return listed


@rollups.command("verify", "recompute the rollups from the calculations and report drift "
                           f"(exit status {DRIFT_EXIT_STATUS} when there is any)")
@over_the_rollups
def analytics_verify(args, config):
    drifted = emit_check(args, run_check(args, recount.verify), "drifted")
    if drifted:
        customers = sum(1 for drift in drifted if drift["customer"] is not None)
        counts = [f"{count} {what}(s)" for count, what in ((customers, "customer"),
                                                          (len(drifted) - customers, "organization")) if count]
        warn(f"analytics drift in {' and '.join(counts)}; `emissions analytics rebuild` repairs it")
        return DRIFT_EXIT_STATUS
    return 0


@rollups.command("rebuild", "recompute the rollups and repair the drifted ones")
@over_the_rollups
def analytics_rebuild(args, config):
    emit_check(args, run_check(args, recount.rebuild), "repaired")
