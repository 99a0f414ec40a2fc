"""The one CSV writer of every file the service writes (exports, downloads).

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` (also after leading spaces or line
breaks), and some treat a leading tab or carriage return the same way; such a cell is written with a
single quote in front, which spreadsheets show as text (OWASP, "CSV Injection"). So is every line
inside a cell that would start a formula, for a reader that splits a cell at its line breaks. Python's
csv quotes a field only for the line terminator (`\n`), so a row holding a carriage return is
written with every field quoted: a bare CR would start a new row in most readers. Columns the caller
names as numeric keep a number as it is (`-1.5` stays a number); anything else in them is
neutralised like text.
"""
from __future__ import annotations

import csv
import re
from typing import Iterable, TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
AFTER_LINE_BREAK = re.compile(r"(\r\n|\r|\n)(?=[ \t]*[=+\-@])")
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\Z")


def safe_cell(text: str) -> str:
    """The cell as a spreadsheet will show it and never run it."""
    if text.startswith(FORMULA_STARTS) or text.lstrip(" \n\r\t").startswith(FORMULA_STARTS):
        text = "'" + text
    return AFTER_LINE_BREAK.sub(r"\1'", text)


class Writer:
    """csv.writer with every cell through safe_cell, except numbers in the numeric columns."""

    def __init__(self, stream: TextIO, numeric_columns: Iterable[int] = ()):
        self._writer = csv.writer(stream, lineterminator="\n")
        self._quoting_writer = csv.writer(stream, lineterminator="\n", quoting=csv.QUOTE_ALL)
        self._numeric = frozenset(numeric_columns)

    def writerow(self, row: Iterable) -> None:
        """Write one row; None is an empty cell."""
        cells = []
        for index, value in enumerate(row):
            text = "" if value is None else str(value)
            cells.append(text if index in self._numeric and NUMBER.match(text) else safe_cell(text))
        (self._quoting_writer if any("\r" in cell for cell in cells) else self._writer).writerow(cells)
