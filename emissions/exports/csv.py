"""CSV files of rows (rows.py), a line at a time, through the one formula-safe writer (csvfile.py)."""
from __future__ import annotations

import io
from decimal import Decimal
from typing import Iterable, Iterator

from .. import csvfile
from .rows import CALCULATION_COLUMNS, CALCULATION_NUMBERS, CalculationRow


def lines(columns: tuple[str, ...], numbers: Iterable[str], rows: Iterable) -> Iterator[str]:
    """The header and each row (a dataclass whose fields include `columns`) as CSV text, a line at a
    time; `numbers` names the columns whose plain numbers stay numbers."""
    return batches(columns, numbers, ([row] for row in rows))


def batches(columns: tuple[str, ...], numbers: Iterable[str], batched_rows: Iterable[list]) -> Iterator[str]:
    """The header, then the text of each batch of rows (a streamed download's chunks)."""
    out = io.StringIO()
    writer = csvfile.Writer(out, numeric_columns=[columns.index(name) for name in numbers])
    writer.writerow(columns)
    yield _taken(out)
    for rows in batched_rows:
        for row in rows:
            writer.writerow([_cell(getattr(row, name)) for name in columns])
        if rows:
            yield _taken(out)


def _cell(value):
    return format(value, "f") if isinstance(value, Decimal) else value


def _taken(out: io.StringIO) -> str:
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text



def calculations(rows: Iterable[CalculationRow]) -> Iterator[str]:
    """The calculation rows as CSV text (rows.CALCULATION_COLUMNS), a line at a time."""
    return lines(CALCULATION_COLUMNS, CALCULATION_NUMBERS, rows)
