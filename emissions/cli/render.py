"""What a command prints: one JSON object with --json, else lines a person reads; a progress bar on stderr."""
from __future__ import annotations

import json
import sys


def prose(value) -> str:
    """A value as a person reads it: yes/no, - for nothing, lists joined by commas."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(prose(item) for item in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{key} {prose(item)}" for key, item in value.items()) or "-"
    return str(value) or "-"


def emit(args, data: dict, text: str | None = None) -> None:
    """One JSON object with --json, else a readable line or block."""
    if args.json:
        print(json.dumps(data, default=str))
    else:
        print(text if text is not None else "\n".join(f"{key}: {prose(value)}" for key, value in data.items()))


def table(rows: list[dict], line, empty: str) -> str:
    """One line per row (`line(row)`), or `empty` when there is none."""
    return "\n".join(line(row) for row in rows) or empty


def warn(message: str) -> None:
    """One line on stderr, before the command's output or error."""
    print(f"emissions: {message}", file=sys.stderr, flush=True)


class ProgressBar:
    """A plain-text bar redrawn in place on stderr: [######......]  50.0%  5,000/10,000 calculations."""

    def __init__(self, total: int, label: str, stream=None, width: int = 30):
        self.total, self.label, self.width = total, label, width
        self.stream = stream or sys.stderr
        self.done = 0
        self.shown = -1

    def advance(self, count: int) -> None:
        self.done += count
        permille = min(self.done, self.total) * 1000 // self.total if self.total else 1000
        if permille != self.shown:  # at most a thousand redraws, however large the data
            self.shown = permille
            self.draw()

    def draw(self) -> None:
        done = min(self.done, self.total)
        filled = self.width * done // self.total if self.total else self.width
        percent = 100 * done / self.total if self.total else 100.0
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {percent:5.1f}%  "
                          f"{self.done:,}/{self.total:,} {self.label}")
        self.stream.flush()

    def finish(self) -> None:
        self.draw()
        self.stream.write("\n")
        self.stream.flush()
