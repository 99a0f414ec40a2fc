"""What the operator typed, read: dates, timestamps, capacities, an organization or user by name, a CSV file."""
from __future__ import annotations

import datetime as dt
import re

import peewee as pw

from .. import accounts
from .. import models
from .. import organizations
from ..csvimport import ImportRejected
from ..models import Organization
from .commands import CommandError
from .render import emit


def parse_date(raw: str | None) -> dt.date | None:
    if raw is None:
        return None
    try:
        return dt.date.fromisoformat(raw)
    except ValueError:
        raise CommandError(f"not a date (YYYY-MM-DD): {raw}") from None


def parse_timestamp(raw: str | None) -> dt.datetime | None:
    if raw is None:
        return None
    try:
        value = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"not an ISO 8601 timestamp: {raw}") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def capacity(raw: str) -> int | None:
    """A monthly capacity: a whole number, or 'none'."""
    if raw.lower() == "none":
        return None
    most = organizations.MAX_CAPACITY
    if not re.fullmatch(r"[0-9]{1,10}", raw) or int(raw) > most:
        raise CommandError(f"capacity must be a whole number from 0 to {most} or 'none', got {raw!r}")
    return int(raw)


def organization(slug: str) -> Organization:
    org = organizations.find(slug)
    if org is None:
        raise CommandError(f"no organization with slug {slug}")
    return org


def user(email: str) -> models.User:
    found = accounts.find_user(email)
    if found is None:
        raise CommandError(f"no user with email {email.strip().lower()}")
    return found


def import_file(args, racing: str, load):
    """Run an all-or-nothing CSV import of args.file; a bad file is one CommandError, each bad row a line."""
    try:
        with open(args.file, newline="", encoding="utf-8-sig") as stream:
            return load(stream)
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CommandError(f"{args.file} is not UTF-8 text; nothing imported") from None
    except pw.IntegrityError:
        raise CommandError(f"{args.file}: {racing} was created meanwhile; nothing imported") from None
    except ImportRejected as rejected:
        emit(args, {"imported": 0, "errors": [problem.to_dict() for problem in rejected.problems]},
             "\n".join(f"line {p.line}: {p.field} {p.reason}" for p in rejected.problems))
        raise CommandError(f"{args.file}: {rejected}") from None
