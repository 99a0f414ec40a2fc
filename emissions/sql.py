"""Hand-written statements: their placeholders, and the row types they read and write, made from the models.

The service speaks Peewee's query builder, except where a request is measured to pay for it
(docs/performance.md, "Machinery, and the floor each holds"). There a statement is text made once,
with `?` placeholders (statement() gives PostgreSQL its `%s`), and its column lists and row types
come from the models' fields through the helpers below, so that a column is described in models.py
alone. unchanged_since() is the stamp a kept answer of such a read is checked against.
"""
from __future__ import annotations

from collections import namedtuple
from functools import lru_cache
from operator import attrgetter
from typing import Iterable, Sequence

import peewee as pw

from .db import db, is_postgres


@lru_cache(maxsize=None)
def _postgres(text: str) -> str:
    if "%" in text or any("?" in literal for literal in text.split("'")[1::2]):
        # The rewrite is textual: a % or a ? inside a quoted literal would be taken for syntax.
        raise ValueError("a hand-written statement must hold no % and no ? inside a literal")
    return text.replace("?", "%s")


def statement(text: str) -> str:
    """A statement with ? placeholders, in the bound database's style (%s for psycopg2)."""
    return _postgres(text) if is_postgres() else text


def run(text: str, params: Sequence = ()):
    """Run one statement; return its cursor."""
    return db.execute_sql(statement(text), params)


def fields_of(model: type[pw.Model], names: Iterable[str] | None = None,
              leaving_out: Iterable[str] = ()) -> tuple[pw.Field, ...]:
    """The model's fields in its order: those named (every one when None), less those left out."""
    left_out = set(leaving_out)
    chosen = model._meta.sorted_fields if names is None else [model._meta.fields[name] for name in names]
    return tuple(field for field in chosen if field.name not in left_out)


def row_type(name: str, model: type[pw.Model], names: Iterable[str] | None = None,
             leaving_out: Iterable[str] = (), doc: str = "") -> type:
    """A named tuple of the model's columns (fields_of's choice), named as the table names them."""
    fields = fields_of(model, names, leaving_out)
    row = namedtuple(name, [field.column_name for field in fields])
    row.__doc__ = doc or f"Columns of {model._meta.table_name}."
    row.fields = fields
    return row


def decoded(row):
    """The row with each column as its model field's Python value (the database's text decimals and
    dates made Decimal and date); None stays None."""
    return row._make(None if value is None else field.python_value(value)
                     for field, value in zip(row.fields, row))


def columns(alias: str, row: type) -> str:
    """A row type's columns as a select list, each behind the table's alias."""
    return ", ".join(f"{alias}.{name}" for name in row._fields)


# Text and integer columns go as they are (their db_value only coerces the types they already have);
# dates, timestamps and decimals through their field's db_value.
AS_THEY_ARE = (pw.CharField, pw.TextField, pw.IntegerField, pw.ForeignKeyField)


class Params:
    """Where the ? of a statement take their values from: a row's attributes named by `names` (the
    fields' column names unless given), each through its field's conversion where one is needed."""

    def __init__(self, fields: Sequence[pw.Field], names: Sequence[str] | None = None):
        names = [field.column_name for field in fields] if names is None else names
        self._values = attrgetter(*names) if len(names) > 1 else (lambda row: (getattr(row, names[0]),))
        self._converted = tuple((index, field.db_value) for index, field in enumerate(fields)
                                if not isinstance(field, AS_THEY_ARE))

    def of(self, row) -> list:
        """The row's values as the database takes them, in the statement's order."""
        values = list(self._values(row))
        for index, to_database in self._converted:
            values[index] = to_database(values[index])
        return values


class Insert:
    """A model's row as a named tuple (`Row`: its columns in the model's order, an automatic id left
    to the database) and the INSERT that writes one (`text`), made once from the model."""

    def __init__(self, model: type[pw.Model], name: str, doc: str, optional: Iterable[str] = ()):
        optional = set(optional)
        fields = [field for field in model._meta.sorted_fields if not isinstance(field, pw.AutoField)]
        # The columns named in `optional` go last and may be left out of a Row: they are then null.
        fields = ([field for field in fields if field.name not in optional]
                  + [field for field in fields if field.name in optional])
        trailing = sum(field.name in optional for field in fields)
        self.Row = namedtuple(name, [field.column_name for field in fields], defaults=[None] * trailing)
        self.Row.__doc__ = doc
        self._params = Params(fields)
        self.text = (f"INSERT INTO {model._meta.table_name} ({', '.join(self.Row._fields)})"
                     f" VALUES ({', '.join('?' for _ in fields)})")

    def params(self, row) -> list:
        """The row's values as the database takes them, in the INSERT's order."""
        return self._params.of(row)


class Joined:
    """The rows of a statement that selects several parts side by side (a join): each part a row type
    behind its table's alias, its columns selected as alias_column, and taken back apart by name."""

    def __init__(self, **parts: type):
        self.parts = parts
        self.Row = namedtuple("Joined", [f"{alias}_{name}" for alias, row in parts.items() for name in row._fields])
        self.columns = self.columns_with()
        self._getters = {alias: (row, attrgetter(*(f"{alias}_{name}" for name in row._fields)),
                                 attrgetter(f"{alias}_{row._fields[0]}"))
                         for alias, row in parts.items()}

    def columns_with(self, **expressions: str) -> str:
        """The select list, with an expression in place of a column where one is given for alias_column."""
        return ", ".join(f"{expressions.get(f'{alias}_{name}', f'{alias}.{name}')} AS {alias}_{name}"
                         for alias, row in self.parts.items() for name in row._fields)

    def row(self, values: Sequence):
        """A row of the statement, its columns named."""
        return self.Row._make(values)

    def part(self, row, alias: str):
        """The part behind `alias`, or None when its first column is null (its outer join found none)."""
        part_type, every, first = self._getters[alias]
        return None if first(row) is None else part_type._make(every(row))


def unchanged_since() -> tuple | None:
    """On SQLite, a stamp that differs from the one taken before whenever the database may have changed
    in between: the connection, its PRAGMA data_version (moved by any other connection's commit, in
    this process or another) and its total_changes (moved by its own writes). None on PostgreSQL,
    which has no such counter. An answer made after a stamp is still right while the stamp is the same."""
    if is_postgres():
        return None
    connection = db.connection()
    (data_version,) = run("PRAGMA data_version").fetchone()
    return connection, data_version, connection.total_changes
