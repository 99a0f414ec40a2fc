"""Customer records: finding, validating, creating, updating and importing them.

Their analytics are in emissions.analytics; the rollup rows, their verify and rebuild, in emissions.rollups.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

import peewee as pw

from . import audit
from . import schemas
from . import text
from .csvimport import ImportRejected, RowProblem, read_records
from .db import db
from .models import Customer, Organization

STATUSES = ("active", "suspended", "archived")
MAX_NAME = 200


def find(organization_id: int, environment: str, reference: str) -> Customer | None:
    """The customer with this reference in the organization and environment, if any."""
    return Customer.get_or_none((Customer.organization == organization_id)
                                & (Customer.environment == environment)
                                & (Customer.reference == reference))


def of_organization(organization: Organization, environment: str | None = None,
                    status: str | None = None) -> list[Customer]:
    """The organization's customers (of one environment or status when given), by environment and reference."""
    query = Customer.select().where(Customer.organization == organization)
    if environment:
        query = query.where(Customer.environment == environment)
    if status:
        query = query.where(Customer.status == status)
    return list(query.order_by(Customer.environment, Customer.reference))


# --- validation ----------------------------------------------------------------------------------

def max_reference_length() -> int:
    return schemas.openapi()["components"]["parameters"]["customerReference"]["schema"]["maxLength"]


def is_valid_reference(reference: str) -> bool:
    """True when the reference keeps the pattern and length of the OpenAPI document's customerReference."""
    return (len(reference) <= max_reference_length()
            and schemas.path_parameter_pattern("customerReference").match(reference) is not None)


def problems(reference: str | None = None, name: str | None = None, country: str | None = None,
             status: str | None = None) -> list[tuple[str, str]]:
    """(field, reason) for every given value that a customer cannot have; None means not given."""
    found = []
    if reference is not None:
        if not reference:
            found.append(("reference", "is required"))
        elif len(reference) > max_reference_length():
            found.append(("reference", f"must be at most {max_reference_length()} characters"))
        elif not is_valid_reference(reference):
            found.append(("reference", "must start with a letter or digit and hold only letters, "
                                       "digits and . _ : / -"))
    if name is not None:
        if not name.strip():
            found.append(("name", "is required"))
        elif len(name) > MAX_NAME:
            found.append(("name", f"must be at most {MAX_NAME} characters"))
        elif text.problem(name):
            found.append(("name", text.problem(name)))
    if country is not None and not (len(country) == 2 and country.isascii() and country.isalpha()):
        found.append(("country", "must be a two-letter country code"))
    if status is not None and status not in STATUSES:
        found.append(("status", "must be one of " + ", ".join(STATUSES)))
    return found


class CustomerError(ValueError):
    """A customer that cannot be created as asked; the message names the fields."""


def create(organization: Organization, environment: str, reference: str, name: str,
           country: str | None = None, status: str = "active", *, actor: str) -> Customer:
    """A new customer of the organization in one environment, with its audit event."""
    found = problems(reference=reference, name=name, country=country or None, status=status)
    if environment not in ("test", "live"):
        found.append(("environment", "must be test or live"))
    if found:
        raise CustomerError("; ".join(f"{field} {reason}" for field, reason in found))
    try:
        with db.atomic():
            customer = Customer.create(organization=organization, environment=environment, reference=reference,
                                       name=name, status=status, country_code=country.upper() if country else None)
            audit.record("customer.created", customer.reference, actor=actor, organization=organization,
                         environment=environment, details={"name": customer.name, "country_code": customer.country_code,
                                                           "status": customer.status})
            return customer
    except pw.IntegrityError:
        raise CustomerError(f"customer {reference} already exists in {environment}") from None


def update(customer: Customer, *, name: str | None = None, country: str | None = None,
           status: str | None = None, actor: str) -> dict:
    """Change what is given (country "" clears it) and audit it; return the changes made, as {field: new value}."""
    found = problems(name=name, country=country or None, status=status)
    if found:
        raise CustomerError("; ".join(f"{field} {reason}" for field, reason in found))
    changes = {}
    if name is not None and name.strip() != customer.name:
        changes["name"] = customer.name = name.strip()
    if country is not None and (country.upper() or None) != customer.country_code:
        changes["country_code"] = customer.country_code = country.upper() or None
    if status is not None and status != customer.status:
        changes["status"] = customer.status = status
    if changes:  # a change to nothing is not an event
        with db.atomic():
            customer.save()
            audit.record("customer.updated", customer.reference, actor=actor, organization=customer.organization_id,
                         environment=customer.environment, details=changes)
    return changes


# --- import --------------------------------------------------------------------------------------

IMPORT_COLUMNS = ("reference", "name", "country", "status")
REQUIRED_COLUMNS = ("reference", "name")


@dataclass
class ImportRow:
    line: int
    reference: str
    name: str
    country: str | None
    status: str


def read_import(stream: TextIO) -> tuple[list[ImportRow], list[RowProblem]]:
    """Parse a customer CSV (header reference,name[,country][,status]); cells are trimmed."""
    records, found = read_records(stream, IMPORT_COLUMNS, REQUIRED_COLUMNS,
                                  "; expected " + ",".join(IMPORT_COLUMNS))
    rows: list[ImportRow] = []
    for line, cells in records:
        row = ImportRow(line, cells["reference"], cells["name"],
                        cells.get("country") or None, cells.get("status") or "active")
        row_problems = problems(row.reference, row.name, row.country, row.status)
        found.extend(RowProblem(line, name, reason) for name, reason in row_problems)
        if not row_problems:
            rows.append(row)
    return rows, found


def import_customers(organization: Organization, environment: str, stream: TextIO, name: str = "csv", *,
                     actor: str) -> int:
    """Create every customer in the CSV in one transaction, or none: raises ImportRejected.
    `name` (the file's) is the audit event's target."""
    rows, found = read_import(stream)
    with db.atomic():
        existing = set()
        references = [row.reference for row in rows]
        for start in range(0, len(references), 500):
            existing.update(reference for (reference,) in Customer.select(Customer.reference).where(
                (Customer.organization == organization) & (Customer.environment == environment)
                & Customer.reference.in_(references[start:start + 500])).tuples())
        found.extend(RowProblem(row.line, "reference", f"already exists in {organization.slug} ({environment})")
                     for row in rows if row.reference in existing)
        if found:
            raise ImportRejected(sorted(found, key=lambda problem: problem.line))
        for start in range(0, len(rows), 500):
            Customer.insert_many([
                {"organization": organization.id, "environment": environment, "reference": row.reference,
                 "name": row.name, "status": row.status,
                 "country_code": row.country.upper() if row.country else None}
                for row in rows[start:start + 500]]).execute()
        audit.record("customer.imported", name, actor=actor, organization=organization, environment=environment,
                     details={"imported": len(rows)})
    return len(rows)
