"""The calculations an API process remembers, so that a replay or a read of one needs no database.

A stored calculation changes only when it is voided (docs/api.md, "Corrections"), and a key stays
bound to it for as long as it is stored (docs/api.md, "Idempotency"). The process that voids forgets
the calculation (forget_ids) and writes a new mark into VOIDS, memory shared by every process forked
from the one that imported this module (`serve --workers`): each of them forgets everything it
remembered when it sees the mark change, before its next answer from memory. Instances that share
only the database do not see it (docs/api.md, "Corrections").

It relies on the database never losing a committed calculation: after restoring a backup or
failing over to a replica that may lack the last commits, restart the instances
(docs/operations.md, "PostgreSQL and several instances").
"""
from __future__ import annotations

import hashlib
import mmap
import os
import threading

# A void's mark: 8 random bytes, rewritten by every void, never incremented (two processes adding
# one at the same moment would write the same value, and one void would go unseen). An anonymous
# mapping is shared with the processes forked after it is made.
VOIDS = mmap.mmap(-1, 8)


def mark_void() -> None:
    """Tell every process sharing VOIDS that a calculation it may remember was voided."""
    VOIDS[:8] = os.urandom(8)


class RecentCalculations:
    """Bodies by id, and by idempotency key with the digest of request bytes known to carry that
    key's payload. Bounded: past `size` entries the first remembered go first; size 0 keeps nothing."""

    def __init__(self, size: int):
        self.size = size
        self._by_id: dict[str, tuple[int, str, str]] = {}  # id -> (organization, environment, body)
        self._by_key: dict[tuple[int, str, str], tuple[bytes, str]] = {}  # -> (sha256 of the request, body)
        self._lock = threading.Lock()  # writers only: a reader takes one dict lookup, atomic under the GIL
        self._mark = VOIDS[:8]

    def _voided_elsewhere(self) -> None:
        """Forget everything when a process sharing VOIDS voided a calculation since last looked."""
        mark = VOIDS[:8]
        if mark != self._mark:
            with self._lock:
                self._by_id.clear()
                self._by_key.clear()
                self._mark = mark

    def body(self, organization_id: int, environment: str, calculation_id: str) -> str | None:
        """The body if known here; a calculation of another tenant is not known here."""
        self._voided_elsewhere()
        found = self._by_id.get(calculation_id)
        if found is None or found[0] != organization_id or found[1] != environment:
            return None
        return found[2]

    def replay(self, organization_id: int, environment: str, idempotency_key: str | None, raw: bytes) -> str | None:
        """The body this key made, when `raw` are the very bytes that were found to carry its payload.

        Such bytes were parsed, validated and found to be the key's payload before, so the answer is
        the replay whatever parsing and validation would say now; for any other bytes, None.
        """
        self._voided_elsewhere()
        found = self._by_key.get((organization_id, environment, idempotency_key))
        if found is None or hashlib.sha256(raw).digest() != found[0]:
            return None
        return found[1]

    def remember(self, organization_id: int, environment: str, calculation_id: str, body: str,
                 idempotency_key: str | None = None, raw: bytes | None = None) -> None:
        """Keep a calculation's body; with its key, when `raw` are request bytes carrying its payload."""
        if not self.size:
            return
        with self._lock:
            self._by_id[calculation_id] = (organization_id, environment, body)
            if idempotency_key is not None and raw is not None:
                self._by_key[(organization_id, environment, idempotency_key)] = (hashlib.sha256(raw).digest(), body)
            for entries in (self._by_id, self._by_key):
                while len(entries) > self.size:
                    del entries[next(iter(entries))]  # dicts keep insertion order: the oldest

    def forget_ids(self, calculation_ids) -> None:
        """Forget these calculations' bodies: a void made them again (emissions/voids.py); tell the
        other processes (mark_void)."""
        if not calculation_ids:
            return
        mark_void()
        with self._lock:
            for calculation_id in calculation_ids:
                self._by_id.pop(calculation_id, None)
            # A body begins with its id (exports.json.calculation): no need to parse it.
            self._by_key = {key: entry for key, entry in self._by_key.items()
                            if not any(calculation_id in entry[1][:50] for calculation_id in calculation_ids)}

    def forget(self) -> None:
        """Keep nothing (as a process that never saw them: another instance, or after a restart)."""
        with self._lock:
            self._by_id.clear()
            self._by_key.clear()
