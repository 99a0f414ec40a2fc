"""Factor files: the library shipped with the package, and operators' own libraries as CSV
(import and export, docs/factors.md). Each adds versions through emissions.factors' rules."""
from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import peewee as pw

from . import audit
from . import csvfile
from .csvimport import ImportRejected, RowProblem, read_records
from .db import db
from .factors import Spec, add_version, check, owner_problem
from .models import Factor, Organization

LIBRARY_PATH = Path(__file__).with_name("data") / "desnz-2025-freight.json"


# --- the library shipped with the package ----------------------------------------------------------

@functools.lru_cache(maxsize=4)
def library(path: Path = LIBRARY_PATH) -> dict:
    """The library file: its publication and, per reference, the Spec it defines (aliases included)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    publication = data["publication"]
    provenance = {"publication_title": publication["title"], "publication_publisher": publication["publisher"],
                  "publication_year": publication["year"], "publication_licence": publication["licence"]}
    valid_from = dt.date.fromisoformat(data["valid_from"]) if data.get("valid_from") else None
    valid_to = dt.date.fromisoformat(data["valid_to"]) if data.get("valid_to") else None
    specs: dict[str, Spec] = {}
    for entry in data["factors"]:
        spec, found = check(entry["reference"], entry["mode"], entry["name"], data["source"], entry["wtw"],
                            ttw=entry["ttw"], wtt=entry["wtt"], region=entry.get("region"), valid_from=valid_from,
                            valid_to=valid_to, ttw_id=entry["ttw_id"], wtt_id=entry["wtt_id"],
                            radiative_forcing=entry.get("radiative_forcing"), **provenance)
        if found:
            raise ValueError(f"library entry {entry['reference']}: {found}")
        specs[spec.reference] = spec
    for alias in data.get("aliases", []):
        target = specs[alias["same_as"]]
        specs[alias["reference"]] = Spec(**{**target.row(), "reference": alias["reference"],
                                            "name": f"{target.name} (alias of {target.reference})"})
    return {"publication": publication, "verification": data.get("verification"), "specs": specs}


@dataclass
class LibraryLoad:
    """What a load of the library did, reference by reference."""

    created: list = field(default_factory=list)  # references new to the database (version 1)
    updated: list = field(default_factory=list)  # references given a new active version
    unchanged: int = 0
    skipped: list = field(default_factory=list)  # (reference, why)

    def to_dict(self) -> dict:
        return {"created": len(self.created), "updated": len(self.updated), "unchanged": self.unchanged,
                "skipped": [{"reference": reference, "reason": reason} for reference, reason in self.skipped],
                "references": {"created": self.created, "updated": self.updated}}


def load_library(path: Path = LIBRARY_PATH, *, actor: str, attempts: int = 3) -> LibraryLoad:
    """Make the library's figures the active global version of each of its references.

    A reference not in the database gets version 1; one whose latest version differs from the
    library (figures, names or provenance) gets a new active version; one that already matches
    is left as it is, so loading again changes nothing. A retired reference stays retired, and a
    reference an organization owns is left to it. One transaction: all of it or none.
    """
    specs = library(path)["specs"]
    for attempt in range(attempts):
        try:
            with db.atomic():
                outcome = _load(specs)
                audit.record("factor.library_loaded", path.name, actor=actor, details={
                    "created": len(outcome.created), "updated": len(outcome.updated),
                    "unchanged": outcome.unchanged, "skipped": len(outcome.skipped)})
                return outcome
        except pw.IntegrityError:  # another process loaded the same versions first: look again
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _latest_versions(references: list[str]) -> dict[str, Factor]:
    latest: dict[str, Factor] = {}
    for start in range(0, len(references), 500):
        query = (Factor.select(Factor, Organization).join(Organization, pw.JOIN.LEFT_OUTER)
                 .where(Factor.reference.in_(references[start:start + 500])).order_by(Factor.version))
        latest.update((factor.reference, factor) for factor in query)
    return latest


def _load(specs: dict[str, Spec]) -> LibraryLoad:
    outcome = LibraryLoad()
    latest = _latest_versions(list(specs))
    for reference, spec in specs.items():
        previous = latest.get(reference)
        if previous is not None and previous.organization_id is not None:
            outcome.skipped.append((reference, f"belongs to {previous.organization.slug}"))
        elif previous is not None and previous.mode != spec.mode:
            outcome.skipped.append((reference, f"is a {previous.mode} factor in this database"))
        elif previous is not None and previous.status == "retired":
            outcome.skipped.append((reference, "is retired"))
        elif previous is not None and spec.same_as(previous):
            outcome.unchanged += 1
        else:
            add_version(spec, previous, None, draft=False)
            (outcome.updated if previous else outcome.created).append(reference)
    return outcome


# --- operators' own libraries: CSV import and export -----------------------------------------------

CSV_COLUMNS = ("reference", "mode", "name", "source", "region", "valid_from", "valid_to", "value", "ttw", "wtt",
               "ttw_id", "wtt_id", "radiative_forcing", "publication_title", "publication_publisher",
               "publication_year", "publication_licence", "hub_type")
REQUIRED_CSV_COLUMNS = ("reference", "mode", "name", "source")
BOOLEANS = {"true": True, "yes": True, "false": False, "no": False}


def _cells_to_spec(cells: dict) -> tuple[Spec | None, list[tuple[str, str]]]:
    found: list[tuple[str, str]] = []
    dates = {}
    for name in ("valid_from", "valid_to"):
        try:
            dates[name] = dt.date.fromisoformat(cells[name]) if cells.get(name) else None
        except ValueError:
            found.append((name, "must be a date (YYYY-MM-DD)"))
    provenance: dict = {name: cells.get(name) or None
                        for name in ("ttw_id", "wtt_id", "publication_title", "publication_publisher",
                                     "publication_licence", "hub_type")}
    year = cells.get("publication_year")
    if year:
        if not (year.isascii() and year.isdigit()):
            found.append(("publication_year", "must be a year such as 2025"))
        else:
            provenance["publication_year"] = int(year)
    forcing = (cells.get("radiative_forcing") or "").lower()
    if forcing and forcing not in BOOLEANS:
        found.append(("radiative_forcing", "must be true or false (or empty)"))
    provenance["radiative_forcing"] = BOOLEANS.get(forcing)
    spec, more = check(cells["reference"], cells["mode"].upper(), cells["name"], cells["source"],
                       cells.get("value") or None, ttw=cells.get("ttw") or None, wtt=cells.get("wtt") or None,
                       region=cells.get("region") or None, **dates, **provenance)
    found.extend(more)
    return (spec if not found else None), found


def read_import(stream: TextIO) -> tuple[list[tuple[int, Spec]], list[RowProblem]]:
    """Parse a factor CSV (docs/factors.md): (line, Spec) for the good rows and the problems of the bad."""
    records, found = read_records(
        stream, CSV_COLUMNS, REQUIRED_CSV_COLUMNS, "; columns: " + ",".join(CSV_COLUMNS),
        lacking=lambda columns: None if "value" in columns or {"ttw", "wtt"} <= set(columns)
        else "value (or ttw and wtt)")
    rows: list[tuple[int, Spec]] = []
    for line, cells in records:
        spec, row_problems = _cells_to_spec(cells)
        found.extend(RowProblem(line, name, reason) for name, reason in row_problems)
        if spec is not None:
            rows.append((line, spec))
    return rows, found


@dataclass
class ImportOutcome:
    created: int = 0  # references new to the database
    versions: int = 0  # new versions of references that existed
    unchanged: int = 0  # rows equal to their reference's latest version: nothing written

    def to_dict(self) -> dict:
        return {"imported": self.created + self.versions, "created": self.created, "new_versions": self.versions,
                "unchanged": self.unchanged}


def import_factors(stream: TextIO, organization: Organization | None = None, draft: bool = False, *,
                   actor: str, name: str = "") -> ImportOutcome:
    """Add every factor version in the CSV in one transaction, or none: raises ImportRejected.

    Each row adds a version of its reference, like `factor create` (active unless draft); a row
    equal to its reference's latest version adds nothing.
    """
    rows, found = read_import(stream)
    outcome = ImportOutcome()
    with db.atomic():
        latest = _latest_versions([spec.reference for _, spec in rows])
        for line, spec in rows:
            problem = owner_problem(spec, latest.get(spec.reference), organization)
            if problem:
                found.append(RowProblem(line, "reference", problem))
        if found:
            raise ImportRejected(sorted(found, key=lambda problem: problem.line))
        status = "draft" if draft else "active"
        new_rows = []
        for _, spec in rows:
            previous = latest.get(spec.reference)
            if previous is not None and spec.same_as(previous):
                outcome.unchanged += 1
                continue
            if previous is None:
                outcome.created += 1
            else:
                outcome.versions += 1
            new_rows.append({**spec.row(), "version": previous.version + 1 if previous else 1,
                             "organization": organization.id if organization else None, "status": status,
                             "created_at": Factor.created_at.default()})
        if not draft:
            superseded = [row["reference"] for row in new_rows]
            for start in range(0, len(superseded), 500):
                Factor.update(status="superseded").where(
                    Factor.reference.in_(superseded[start:start + 500]) & (Factor.status == "active")).execute()
        for start in range(0, len(new_rows), 200):
            Factor.insert_many(new_rows[start:start + 200]).execute()
        audit.record("factor.imported", name or "csv", actor=actor, organization=organization,
                     details={**outcome.to_dict(), "draft": draft})
    return outcome


def active_versions(organization: Organization | None = None) -> list[Factor]:
    """The active versions of the global factors, or of one organization's own, by reference."""
    owner = Factor.organization.is_null() if organization is None else Factor.organization == organization
    return list(Factor.select().where(owner & (Factor.status == "active")).order_by(Factor.reference))


def export_factors(stream: TextIO, organization: Organization | None = None) -> int:
    """Write the active versions (global, or the organization's own) as an import CSV; return how many."""
    writer = csvfile.Writer(stream, numeric_columns=[CSV_COLUMNS.index(name) for name in ("value", "ttw", "wtt")])
    writer.writerow(CSV_COLUMNS)
    exported = active_versions(organization)
    for factor in exported:
        forcing = "" if factor.radiative_forcing is None else str(factor.radiative_forcing).lower()
        values = {**{name: getattr(factor, name) for name in CSV_COLUMNS if hasattr(Factor, name)},
                  "ttw": factor.ttw_value, "wtt": factor.wtt_value, "radiative_forcing": forcing}
        writer.writerow(["" if values[name] is None else str(values[name]) for name in CSV_COLUMNS])
    return len(exported)
