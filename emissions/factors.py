"""Governed emission factors: versions, activation, retirement, and the default library."""
from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal, InvalidOperation
from pathlib import Path

import peewee as pw

from .models import MODES, Factor, Organization, db

LIBRARY_PATH = Path(__file__).with_name("data") / "default-factors.json"
STATUSES = ("draft", "active", "superseded", "retired")


class FactorError(ValueError):
    """A factor command that cannot be carried out; the message says why."""


def parse_value(raw) -> Decimal:
    """A factor value in kgCO2e/tkm: a finite decimal above 0 and at most 100."""
    try:
        value = Decimal(str(raw))
    except InvalidOperation:
        raise FactorError(f"value must be a decimal number, got {raw!r}") from None
    if not value.is_finite() or value <= 0 or value > 100:
        raise FactorError("value must be above 0 and at most 100 kgCO2e/tkm")
    return value


def create(reference: str, mode: str, value, name: str, source: str, *, region: str | None = None,
           valid_from: dt.date | None = None, valid_to: dt.date | None = None,
           organization: Organization | None = None, draft: bool = False,
           ttw_value=None, wtt_value=None) -> Factor:
    """Add a new version of a factor; unless draft, it becomes active and supersedes the last one."""
    if mode not in MODES:
        raise FactorError(f"mode must be one of {', '.join(MODES)}")
    if not reference or len(reference) > 120:
        raise FactorError("reference must be 1 to 120 characters")
    for field, text, limit in (("name", name, 200), ("source", source, 300), ("region", region, 64)):
        if text is not None and not 0 < len(text.strip()) <= limit:  # the columns' sizes
            raise FactorError(f"{field} must be 1 to {limit} characters")
    if valid_from and valid_to and valid_to < valid_from:
        raise FactorError("valid_to must not be before valid_from")
    value = parse_value(value)
    with db.atomic():
        previous = Factor.select().where(Factor.reference == reference).order_by(Factor.version.desc()).first()
        if previous and previous.organization_id != (organization.id if organization else None):
            owner = previous.organization.slug if previous.organization_id else "the global library"
            raise FactorError(f"reference {reference} already belongs to {owner}")
        if previous and previous.mode != mode:
            raise FactorError(f"reference {reference} is a {previous.mode} factor; use a new reference")
        if not draft:
            _supersede_active(reference)
        return Factor.create(
            reference=reference, version=(previous.version + 1) if previous else 1,
            organization=organization, status="draft" if draft else "active", mode=mode, value=value,
            ttw_value=None if ttw_value is None else parse_value(ttw_value),
            wtt_value=None if wtt_value is None else parse_value(wtt_value),
            name=name, source=source, region=region, valid_from=valid_from, valid_to=valid_to,
        )


def _supersede_active(reference: str) -> None:
    Factor.update(status="superseded").where(
        (Factor.reference == reference) & (Factor.status == "active")).execute()


def get_version(reference: str, version: int) -> Factor:
    factor = Factor.get_or_none((Factor.reference == reference) & (Factor.version == version))
    if factor is None:
        raise FactorError(f"no factor {reference} version {version}")
    return factor


def activate(reference: str, version: int) -> Factor:
    """Make one version active; the version active before it becomes superseded."""
    with db.atomic():
        factor = get_version(reference, version)
        if factor.status != "active":
            _supersede_active(reference)
            factor.status = "active"
            factor.save()
    return factor


def retire(reference: str) -> Factor:
    """Retire the active version: new calculations can no longer use the reference."""
    with db.atomic():
        factor = Factor.get_or_none((Factor.reference == reference) & (Factor.status == "active"))
        if factor is None:
            raise FactorError(f"factor {reference} has no active version to retire")
        factor.status = "retired"
        factor.save()
    return factor


def load_library(path: Path = LIBRARY_PATH) -> list[Factor]:
    """Create the library's global factors that do not exist yet; return the ones created."""
    library = json.loads(path.read_text())
    created = []
    for entry in library["factors"]:
        if entry["mode"] not in MODES:
            continue  # kept in the file for later (e.g. RAIL), not served by v1
        if Factor.select().where(Factor.reference == entry["reference"]).exists():
            continue
        try:
            created.append(create(
                entry["reference"], entry["mode"], entry["wtw"], entry["name"], library["source"],
                region=entry.get("region"), ttw_value=entry["ttw"], wtt_value=entry["wtt"],
                valid_from=dt.date.fromisoformat(entry["valid_from"]) if entry.get("valid_from") else None,
                valid_to=dt.date.fromisoformat(entry["valid_to"]) if entry.get("valid_to") else None,
            ))
        except pw.IntegrityError:  # a second process loaded the same entry at the same time
            continue
    return created
