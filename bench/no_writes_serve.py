"""Diagnostic only, never for use: `emissions serve` whose calculations write nothing.

Each fresh calculation does everything the real one does (authentication, validation, the
fingerprint, the lookup statement, the arithmetic, the body and the event's JSON) except its
write transaction, which runs no statement: nothing is stored, counted or sent. bench/ceiling.py
serves this beside the real service to measure how fast a POST could be if storing cost nothing.
Usage: python bench/no_writes_serve.py [emissions serve options]
"""
from __future__ import annotations

import sys

from emissions import calculations
from emissions import cli


class NoWrites:
    """Stands where models.WriteTransaction stands in calculations.calculate(): runs nothing."""

    rowcount = 1  # the usage counter "changed", so capacity never refuses

    def __enter__(self) -> "NoWrites":
        return self

    def __exit__(self, *exc_info) -> bool:
        return False

    def execute(self, statement: str, parameters=()) -> None:
        pass


if __name__ == "__main__":
    calculations.WriteTransaction = NoWrites
    sys.exit(cli.main(["serve", *sys.argv[1:]]))
