"""The rollup tables: a customer's running totals per mode and business context (customer_rollup), per
activity day and month (customer_period_rollup), and its organization's per day
(organization_period_rollup).

Each calculation and each shipment hub adds to them in its own write (store.Write: the upserts
below); the analytics read them (the reads below, answered by analytics.py and periods.py); the
operator's `emissions analytics verify` and `rebuild` recount them from the stored calculations
(emissions/rollups/recount.py).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from operator import attrgetter

import peewee as pw

from ..db import EXACT_SUM, is_postgres
from ..fields import ExactDecimalField
from ..models import (Customer, CustomerPeriodRollup, CustomerRollup, OrganizationPeriodRollup,
                      PeriodTotals)
from ..sql import Joined, Params, columns, decoded, row_type, run, statement

ZERO = Decimal(0)
EXACT = EXACT_SUM  # every sum is made in this context, the one SQLite's decimal_add uses

# The sums every rollup row keeps, as the models name them: activity, emissions and its TTW and WTT parts.
SUMS = tuple(item.name for item in PeriodTotals._meta.sorted_fields if isinstance(item, ExactDecimalField))
COUNT = PeriodTotals.calculation_count.name
EMISSIONS = tuple(name for name in SUMS if name != PeriodTotals.activity_tkm.name)  # what a hub adds to the others
PARTS = (PeriodTotals.emissions_ttw_kg.name, PeriodTotals.emissions_wtt_kg.name)  # TTW and WTT
_SUMS_OF = attrgetter(*SUMS)


# --- what a write adds ----------------------------------------------------------------------------

Addition = row_type(
    "Addition", CustomerPeriodRollup, leaving_out=("span", COUNT),
    doc="One calculation, or a shipment's hub (mode HUB, its activity the tonnes handled), as it adds to its "
        "customer's rollups; its TTW and WTT parts are None when it has none.")


def _insert_columns(model: type[pw.Model]) -> list[str]:
    return [item.column_name for item in model._meta.sorted_fields if not isinstance(item, pw.AutoField)]


def _key(model: type[pw.Model]) -> str:
    """The columns of the model's unique key, which an upsert's ON CONFLICT names."""
    primary = model._meta.primary_key
    if isinstance(primary, pw.CompositeKey):
        names = primary.field_names
    else:
        names = next(index_names for index_names, unique in model._meta.indexes if unique)
    return ", ".join(model._meta.fields[name].column_name for name in names)


def _added(table: str, add: str, count: str = "1") -> str:
    """The SET clause of a rollup upsert: `count` more calculations, each sum plus the new row's (`add`
    spells the addition: `+`, or decimal_add for SQLite's decimal text)."""
    return ", ".join([f"{COUNT} = {table}.{COUNT} + {count}",
                      *(f"{column} = " + add.format(f"{table}.{column}", f"EXCLUDED.{column}") for column in SUMS)])


def _values(model: type[pw.Model], literals: dict[str, str]) -> str:
    return "(" + ", ".join(literals.get(column, "?") for column in _insert_columns(model)) + ")"


def _placeholders(model: type[pw.Model], literals: dict[str, str]) -> tuple[pw.Field, ...]:
    """The model's fields a row's ? stand for, in the INSERT's order."""
    return tuple(item for item in model._meta.sorted_fields
                 if not isinstance(item, pw.AutoField) and item.column_name not in literals)


# By hand, with the columns from the models, for store.py's reason (a statement of every calculation),
# and each one atomic upsert, so that concurrent writers cannot lose an update.
@lru_cache(maxsize=None)
def _customer_rollup(postgres: bool) -> str:
    # SQLite's two-argument MIN and MAX are scalar; its dates are ISO text, so text order is date order;
    # decimals are text summed by db.decimal_add (exact, in the same context).
    add, least, greatest = ("{0} + {1}", "LEAST", "GREATEST") if postgres else ("decimal_add({0}, {1})", "MIN", "MAX")
    table = CustomerRollup._meta.table_name
    first, last = CustomerRollup.first_activity_date.column_name, CustomerRollup.last_activity_date.column_name
    return (f"INSERT INTO {table} ({', '.join(_insert_columns(CustomerRollup))})"
            f" VALUES {_values(CustomerRollup, {COUNT: '1'})}"
            f" ON CONFLICT ({_key(CustomerRollup)}) DO UPDATE SET {_added(table, add)},"
            f" {first} = {least}({table}.{first}, EXCLUDED.{first}),"
            f" {last} = {greatest}({table}.{last}, EXCLUDED.{last})")


@lru_cache(maxsize=None)
def _period_rollups(postgres: bool) -> str:
    """The day row and the month row of one calculation, in one upsert."""
    add = "{0} + {1}" if postgres else "decimal_add({0}, {1})"  # decimals are text on SQLite (db.decimal_add)
    table = CustomerPeriodRollup._meta.table_name
    return (f"INSERT INTO {table} ({', '.join(_insert_columns(CustomerPeriodRollup))})"
            f" VALUES {_values(CustomerPeriodRollup, {'span': repr('day'), COUNT: '1'})},"
            f" {_values(CustomerPeriodRollup, {'span': repr('month'), COUNT: '1'})}"
            f" ON CONFLICT ({_key(CustomerPeriodRollup)}) DO UPDATE SET {_added(table, add)}")


@lru_cache(maxsize=None)
def _organization_days(rows: int, postgres: bool) -> str:
    add = "{0} + {1}" if postgres else "decimal_add({0}, {1})"  # decimals are text on SQLite (db.decimal_add)
    table = OrganizationPeriodRollup._meta.table_name
    return (f"INSERT INTO {table} ({', '.join(_insert_columns(OrganizationPeriodRollup))})"
            " VALUES " + ", ".join([_values(OrganizationPeriodRollup, {"span": repr("day")})] * rows) +
            f" ON CONFLICT ({_key(OrganizationPeriodRollup)}) DO UPDATE SET"
            f" {_added(table, add, f'EXCLUDED.{COUNT}')}")


# Where each ? of a row takes its value from: the Addition's column of the same name; the customer
# rollup's first and last activity dates are the addition's activity date.
_FROM_ADDITION = {CustomerRollup.first_activity_date.column_name: "activity_date",
                  CustomerRollup.last_activity_date.column_name: "activity_date"}
_CUSTOMER_ROLLUP = _placeholders(CustomerRollup, {COUNT: "1"})
_CUSTOMER_ROLLUP_PARAMS = Params(_CUSTOMER_ROLLUP, [_FROM_ADDITION.get(item.column_name, item.column_name)
                                                    for item in _CUSTOMER_ROLLUP])
_PERIOD_ROLLUP_PARAMS = Params(_placeholders(CustomerPeriodRollup, {"span": "", COUNT: "1"}))
OrganizationDay = row_type("OrganizationDay", OrganizationPeriodRollup, leaving_out=("span",),
                           doc="An organization's day row as one write adds to it.")
_ORGANIZATION_DAY_PARAMS = Params(_placeholders(OrganizationPeriodRollup, {"span": ""}))


def _with_parts(addition) -> Addition:
    """The addition with TTW and WTT 0 when it has no parts: the rollups' parts count only those that have."""
    if getattr(addition, PARTS[0]) is None:
        return addition._replace(**dict.fromkeys(PARTS, ZERO))
    return addition


def add_to_rollup(addition: Addition) -> tuple[str, list]:
    """The statement adding one calculation to its customer's rollup row, and its parameters."""
    addition = _with_parts(addition)
    return _customer_rollup(is_postgres()), _CUSTOMER_ROLLUP_PARAMS.of(addition)


def add_to_period_rollups(addition: Addition) -> tuple[str, list]:
    """The statement adding one calculation to its activity day's row and its month's row, and its parameters."""
    addition = _with_parts(addition)
    month = addition._replace(activity_date=addition.activity_date.replace(day=1))
    return _period_rollups(is_postgres()), _PERIOD_ROLLUP_PARAMS.of(addition) + _PERIOD_ROLLUP_PARAMS.of(month)


# --- what a void takes away (docs/api.md, "Corrections") -------------------------------------------

def _taken(table: str, key: tuple[str, ...], postgres: bool) -> str:
    """An UPDATE of one rollup row (found by `key`'s columns): one calculation less, each sum plus the
    parameter given for it (the row's value negated)."""
    add = "{0} + {1}" if postgres else "decimal_add({0}, {1})"
    sums = ", ".join(f"{column} = " + add.format(column, "?") for column in SUMS)
    return (f"UPDATE {table} SET {COUNT} = {COUNT} - 1, {sums}"
            f" WHERE " + " AND ".join(f"{column} = ?" for column in key))


_ROLLUP_KEY = ("customer_id", "environment", "mode", "business_context")
_PERIOD_KEY = ("customer_id", "environment", "span", "activity_date", "mode", "business_context")
_NEGATED = Params([PeriodTotals._meta.fields[name] for name in SUMS])
_DAY = CustomerPeriodRollup.activity_date.db_value


def _negated(addition) -> Addition:
    return addition._replace(**{name: EXACT.minus(getattr(addition, name)) for name in SUMS})


def take_from_rollups(addition: Addition) -> list[tuple[str, list]]:
    """The statements taking one calculation (or a hub) out of its customer's rollup row and its day
    and month rows, each with its parameters; the rows it leaves empty are deleted by tidy_rollups()."""
    addition = _with_parts(addition)
    negated = _NEGATED.of(_negated(addition))
    postgres = is_postgres()
    owner = [addition.customer_id, addition.environment]
    kind = [addition.mode, addition.business_context]
    taken = [(_taken(CustomerRollup._meta.table_name, _ROLLUP_KEY, postgres), negated + owner + kind)]
    for span, day in (("day", addition.activity_date), ("month", addition.activity_date.replace(day=1))):
        taken.append((_taken(CustomerPeriodRollup._meta.table_name, _PERIOD_KEY, postgres),
                      negated + owner + [span, _DAY(day)] + kind))
    return taken


# After the rows are taken from: a customer rollup row's first and last activity day are its day
# rows' (which hold exactly the calculations still counted), then the rows left empty go, as a
# recount would not make them (emissions/rollups/recount.py).
_DAY_ROWS = ("SELECT {} (activity_date) FROM customer_period_rollup WHERE customer_id = ? AND environment = ?"
             " AND span = 'day' AND mode = ? AND business_context = ?")
_EDGES_AGAIN = (f"UPDATE customer_rollup SET first_activity_date = COALESCE(({_DAY_ROWS.format('MIN')}),"
          f" first_activity_date), last_activity_date = COALESCE(({_DAY_ROWS.format('MAX')}), last_activity_date)"
          " WHERE customer_id = ? AND environment = ? AND mode = ? AND business_context = ?")
_EMPTY_PERIODS = f"DELETE FROM customer_period_rollup WHERE customer_id = ? AND environment = ? AND {COUNT} = 0"
_EMPTY_ROLLUPS = f"DELETE FROM customer_rollup WHERE customer_id = ? AND environment = ? AND {COUNT} = 0"
EMPTY_DAYS = (f"DELETE FROM organization_period_rollup WHERE organization_id = ? AND environment = ?"
              f" AND span = 'day' AND {COUNT} = 0")


def tidy_rollups(customer_id: int, environment: str, kinds: set[tuple[str, str]]) -> list[tuple[str, list]]:
    """The statements run after take_from_rollups(): the customer's empty period rows deleted, the
    first and last activity days of its rollup rows of `kinds` ((mode, business context)) made again
    from its day rows, and its empty rollup rows deleted."""
    owner = [customer_id, environment]
    return [(_EMPTY_PERIODS, owner),
            *((_EDGES_AGAIN, [*owner, mode, context] * 3) for mode, context in sorted(kinds)),
            (_EMPTY_ROLLUPS, owner)]


class OrganizationDays:
    """What one write adds to its organization's day rows (organization_period_rollup), gathered as
    store.Write counts each calculation and hub, and written in one upsert (statement()) after the
    write's other rows and before its events, a row per (day, mode, business context) in key order.

    On PostgreSQL the rows are locked after everything else the write locks (its usage counter row
    first of all, which already queues the organization's writers of the month), and in one order:
    a transaction holding one never waits but for another of them, taken in that same order, so
    two writes cannot deadlock on them, whatever order a shipment's legs and hubs come in."""

    def __init__(self, organization_id: int, environment: str):
        self.organization_id = organization_id
        self.environment = environment
        self.rows: dict[tuple, Sums] = {}

    def add(self, addition: Addition) -> None:
        addition = _with_parts(addition)
        key = (addition.activity_date, addition.mode, addition.business_context)
        values = _SUMS_OF(addition)
        sums = self.rows.get(key)
        if sums is None:
            self.rows[key] = Sums(1, *values)  # Sums' fields are the count, then SUMS
        else:
            sums.add(*values)

    def take(self, addition: Addition) -> None:
        """A voided calculation (or hub) taken away: its day row one calculation and its sums less."""
        negated = Sums(-1, *_SUMS_OF(_negated(_with_parts(addition))))
        key = (addition.activity_date, addition.mode, addition.business_context)
        self.rows.setdefault(key, Sums()).merge(negated)

    def statement(self) -> tuple[str, list] | None:
        """The one statement adding the gathered rows, and its parameters (None when nothing was counted)."""
        if not self.rows:
            return None
        params = []
        for (activity_date, mode, context), sums in sorted(self.rows.items()):
            params += _ORGANIZATION_DAY_PARAMS.of(OrganizationDay(
                organization_id=self.organization_id, environment=self.environment, activity_date=activity_date,
                mode=mode, business_context=context, calculation_count=sums.calculation_count,
                **{name: getattr(sums, name) for name in SUMS}))
        return statement(_organization_days(len(self.rows), is_postgres())), params


# --- the sums a rollup row keeps, and its key ---------------------------------------------------------

RollupKey = row_type("RollupKey", CustomerRollup, ("environment", "mode", "business_context"),
                     doc="A customer rollup row's key.")
PeriodKey = row_type("PeriodKey", CustomerPeriodRollup, ("environment", "mode", "business_context", "span",
                                                         "activity_date"),
                     doc="A period rollup row's key (a customer's, or an organization's day row).")


class _Adding:
    """Sums' own behaviour (its fields are made from the models' sums below)."""

    def add(self, *values: Decimal | None) -> None:
        """One calculation more: its values in the order of SUMS; TTW and WTT are None when it has no parts,
        and the sums of the parts count only those that have them."""
        self.calculation_count += 1
        for name, value in zip(SUMS, values):
            if value is not None:
                setattr(self, name, EXACT.add(getattr(self, name), value))

    def merge(self, row, names: tuple[str, ...] = SUMS, counted: bool = True) -> None:
        """Add a row's sums of `names` (Python values), and its count unless not `counted`."""
        if counted:
            self.calculation_count += row.calculation_count
        for name in names:
            setattr(self, name, EXACT.add(getattr(self, name), getattr(row, name)))

    def shifted(self, other, sign: int) -> None:
        """Add (sign 1) or take away (-1) another row's count and sums."""
        self.calculation_count += sign * other.calculation_count
        for name in SUMS:
            setattr(self, name, EXACT.add(getattr(self, name), EXACT.multiply(sign, getattr(other, name))))

    def to_dict(self) -> dict:
        return {COUNT: self.calculation_count, **{name: format(getattr(self, name).normalize(EXACT), "f")
                                                   for name in SUMS}}


Sums = dataclasses.make_dataclass("Sums", [(COUNT, int, 0), *((name, Decimal, ZERO) for name in SUMS)],
                                  bases=(_Adding,))
Sums.__doc__ = "What one period rollup row holds, or should hold (its TTW and WTT over the calculations with parts)."


def sums_of(row, kind: type = None, **more):
    """The count and sums of a stored row (a model instance) as a Sums, or as `kind`."""
    return (kind or Sums)(**{COUNT: getattr(row, COUNT)}, **{name: getattr(row, name) for name in SUMS}, **more)


def _iso(value) -> str | None:
    return None if value is None else value.isoformat()


@dataclass
class Totals(Sums):
    """What one customer rollup row holds, or should hold: a period row's sums and the activity dates' span."""

    first_activity_date: dt.date | None = None
    last_activity_date: dt.date | None = None

    def add(self, activity_date: dt.date, *values: Decimal | None) -> None:
        """One calculation more, on `activity_date`: its values as Sums.add takes them."""
        super().add(*values)
        if self.first_activity_date is None or activity_date < self.first_activity_date:
            self.first_activity_date = activity_date
        if self.last_activity_date is None or activity_date > self.last_activity_date:
            self.last_activity_date = activity_date

    def to_dict(self) -> dict:
        return {**super().to_dict(), "first_activity_date": _iso(self.first_activity_date),
                "last_activity_date": _iso(self.last_activity_date)}


# --- what the analytics read ------------------------------------------------------------------------

CustomerPart = row_type("CustomerPart", Customer, ("name", "status", "country_code"),
                        doc="The customer's columns an analytics answer shows.")
RollupRow = row_type("RollupRow", CustomerRollup, leaving_out=("id", "customer", "environment"),
                     doc="A customer rollup row: one mode and business context over the customer's lifetime.")
PeriodRow = row_type("PeriodRow", CustomerPeriodRollup, leaving_out=("customer", "environment"),
                     doc="A customer period rollup row: one activity day or month (span), mode and business context.")
Edges = row_type("Edges", CustomerRollup, ("first_activity_date", "last_activity_date"),
                 doc="The first and last activity day with data in a period.")

# The customer and its rollup rows, a row per rollup row (the rollup's columns null when it has none):
# by hand, as the API's read of a customer runs it on every GET and the builder would compile it each time.
_CUSTOMER = " FROM customer AS c"
_WHERE_CUSTOMER = " WHERE c.organization_id = ? AND c.environment = ? AND c.reference = ?"
_ROLLUPS = " LEFT JOIN customer_rollup AS r ON r.customer_id = c.id AND r.environment = c.environment"
WITH_ROLLUPS = Joined(c=CustomerPart, r=RollupRow)
FIND_WITH_ROLLUPS = f"SELECT {WITH_ROLLUPS.columns}{_CUSTOMER}{_ROLLUPS}{_WHERE_CUSTOMER}"

# The customer's rollup rows, then its month rows: each row holds the customer and one of the two
# parts, as the part it is for (parts.part) finds it; the other part's outer join finds nothing.
WITH_MONTHS = Joined(c=CustomerPart, r=RollupRow, m=PeriodRow)
LIFETIME = (f"SELECT {WITH_MONTHS.columns}{_CUSTOMER}"
            " CROSS JOIN (SELECT 'rollups' AS part UNION ALL SELECT 'months') AS parts"
            " LEFT JOIN customer_rollup AS r ON parts.part = 'rollups' AND r.customer_id = c.id"
            " AND r.environment = c.environment"
            " LEFT JOIN customer_period_rollup AS m ON parts.part = 'months' AND m.customer_id = c.id"
            " AND m.environment = c.environment AND m.span = 'month'"
            f"{_WHERE_CUSTOMER}")


def _edge(aggregate: str) -> str:
    return (f"(SELECT {aggregate}(d.activity_date) FROM customer_period_rollup AS d"
            " WHERE d.customer_id = c.id AND d.environment = c.environment AND d.span = 'day'"
            " AND d.activity_date >= ? AND d.activity_date <= ?)")


# The customer with the first and last activity day in a period (worked out once, in the WITH), and
# its period rows in three ranges: the month rows of the whole months inside the period, and the day
# rows before and after them.
IN_PERIOD = Joined(c=CustomerPart, e=Edges, p=PeriodRow)
_EDGES = (f"WITH c AS (SELECT c.id, c.environment, {columns('c', CustomerPart)},"
          f" {_edge('MIN')} AS first_activity_date, {_edge('MAX')} AS last_activity_date"
          f"{_CUSTOMER}{_WHERE_CUSTOMER}) ")
_IN_RANGE = (f"SELECT {IN_PERIOD.columns_with(**{f'e_{name}': f'c.{name}' for name in Edges._fields})} FROM c"
             " LEFT JOIN customer_period_rollup AS p ON p.customer_id = c.id AND p.environment = c.environment"
             " AND p.span = '{span}' AND p.activity_date >= ? AND p.activity_date <= ?")
# The WITH inside a subquery: a statement is a SELECT from its first word (tests/test_statement_count.py).
PERIOD = ("SELECT * FROM (" + _EDGES
          + " UNION ALL ".join(_IN_RANGE.format(span=span) for span in ("month", "day", "day")) + ") AS period")


def customer_with_rollups(organization_id: int, environment: str,
                          reference: str) -> tuple[CustomerPart, list[RollupRow]] | None:
    """The customer's columns and its rollup rows (Python values), or None when no such customer."""
    rows = [WITH_ROLLUPS.row(row) for row in run(FIND_WITH_ROLLUPS, (organization_id, environment, reference))]
    if not rows:
        return None
    found = (WITH_ROLLUPS.part(row, "r") for row in rows)
    return WITH_ROLLUPS.part(rows[0], "c"), [decoded(rollup) for rollup in found if rollup is not None]


def lifetime(organization_id: int, environment: str, reference: str) -> tuple:
    """The rows of LIFETIME for this customer, as the database returns them (none when no such customer)."""
    return tuple(run(LIFETIME, (organization_id, environment, reference)).fetchall())


def lifetime_parts(rows: tuple) -> tuple[CustomerPart, list[RollupRow], list[PeriodRow]] | None:
    """LIFETIME's rows taken apart: the customer, its rollup rows and its month rows (Python values)."""
    if not rows:
        return None
    named = [WITH_MONTHS.row(row) for row in rows]
    rollups: dict[tuple, RollupRow] = {}
    months = []
    for row in named:
        rollup, month = WITH_MONTHS.part(row, "r"), WITH_MONTHS.part(row, "m")
        if rollup is not None:
            rollups.setdefault((rollup.mode, rollup.business_context), rollup)
        if month is not None:
            months.append(decoded(month))
    return WITH_MONTHS.part(named[0], "c"), [decoded(rollup) for rollup in rollups.values()], months


def in_period(organization_id: int, environment: str, reference: str, period: tuple[dt.date, dt.date],
              ranges: tuple[tuple[dt.date, dt.date], ...]) -> tuple:
    """The rows of PERIOD for this customer: its edges in `period`, its month rows in the first of the
    ranges and its day rows in the other two, as the database returns them (none when no such customer)."""
    day = CustomerPeriodRollup.activity_date.db_value
    first_day, last_day = period
    span = (day(first_day), day(last_day))
    params: tuple = (*span, *span, organization_id, environment, reference)
    for first, last in ranges:
        params += (day(first), day(last))
    return tuple(run(PERIOD, params).fetchall())


def period_parts(rows: tuple) -> tuple[CustomerPart, Edges | None, list[PeriodRow]] | None:
    """PERIOD's rows taken apart: the customer, its edges (None without a day in the period) and its period rows."""
    if not rows:
        return None
    named = [IN_PERIOD.row(row) for row in rows]
    edges = IN_PERIOD.part(named[0], "e")
    found = (IN_PERIOD.part(row, "p") for row in named)
    return (IN_PERIOD.part(named[0], "c"), None if edges is None else decoded(edges),
            [decoded(row) for row in found if row is not None])


