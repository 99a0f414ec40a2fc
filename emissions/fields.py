"""The column types the models add to peewee's: an exact decimal and a UTC timestamp, alike on SQLite
and PostgreSQL."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import peewee as pw


class ExactDecimalField(pw.Field):
    """A decimal kept exactly on both databases."""

    field_type = "EXACTDECIMAL"

    def db_value(self, value):
        if value is None:
            return None
        return str(Decimal(value))

    def python_value(self, value):
        if value is None:
            return None
        return Decimal(str(value)) if not isinstance(value, Decimal) else value


class TimestampField(pw.DateTimeField):
    """A UTC timestamp stored as ISO text on SQLite and timestamptz-compatible text elsewhere."""

    field_type = "TIMESTAMP"

    def db_value(self, value):
        if value is None:
            return None
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)

    def python_value(self, value):
        if value is None:
            return None
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        return value.replace(tzinfo=dt.timezone.utc)
