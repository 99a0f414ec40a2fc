"""The CSV imports' common reading: the header, each record's line, and the problems found.

`customer import` and `factor import` both take every row or none and name each bad row by the
line where its record starts; the rules of what a row means stay with each module.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Callable, Iterable, TextIO


@dataclass(frozen=True)
class RowProblem:
    """Why one line of an import file cannot be imported."""

    line: int
    field: str
    reason: str

    def to_dict(self) -> dict:
        return {"line": self.line, "field": self.field, "reason": self.reason}


class ImportRejected(Exception):
    """The file has bad rows; nothing was imported."""

    def __init__(self, found: list[RowProblem]):
        super().__init__(f"{len({p.line for p in found})} bad row(s); nothing imported")
        self.problems = found


def read_records(stream: TextIO, allowed: Iterable[str], required: Iterable[str], expected: str,
                 lacking: Callable[[list[str]], str | None] = lambda columns: None,
                 ) -> tuple[list[tuple[int, dict]], list[RowProblem]]:
    """(line, trimmed cells by column) of each non-blank record, and the problems of the file's shape.

    `expected` ends the header's problem (which columns the file should have); `lacking` names a
    column the header needs beyond `required`, if any. A reference repeated within the file is a
    problem of the later line."""
    allowed, required = tuple(allowed), tuple(required)
    reader = csv.reader(stream, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        return [], [RowProblem(1, "header", f"is not valid CSV: {exc}")]
    if header is None:
        return [], [RowProblem(1, "header", "is missing" + expected)]
    columns = [cell.strip().lower() for cell in header]
    unknown = [column for column in columns if column not in allowed]
    missing = [column for column in required if column not in columns]
    if not unknown and not missing and lacking(columns):
        missing = [lacking(columns)]
    if unknown or missing or len(set(columns)) != len(columns):
        reason = (f"has unknown column {unknown[0]!r}" if unknown else
                  f"lacks the column {missing[0]!r}" if missing else "repeats a column")
        return [], [RowProblem(1, "header", reason + expected)]

    records: list[tuple[int, dict]] = []
    found: list[RowProblem] = []
    first_line_of: dict[str, int] = {}
    last_line = reader.line_num
    while True:
        start = last_line + 1  # a quoted cell may span lines: report where the record starts
        try:
            record = next(reader, None)
        except csv.Error as exc:
            found.append(RowProblem(start, "row", f"is not valid CSV: {exc}"))
            break
        last_line = reader.line_num
        if record is None:
            break
        if not any(cell.strip() for cell in record):
            continue  # blank line
        if len(record) != len(columns):
            found.append(RowProblem(start, "row", f"has {len(record)} fields; the header has {len(columns)}"))
            continue
        cells = {column: cell.strip() for column, cell in zip(columns, record)}
        reference = cells.get("reference", "")
        if reference in first_line_of:
            found.append(RowProblem(start, "reference", f"duplicates line {first_line_of[reference]}"))
        elif reference:
            first_line_of[reference] = start
        records.append((start, cells))
    return records, found
