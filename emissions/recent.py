"""The calculations an API process remembers, so that a replay or a read of one needs no database.

A stored calculation changes only when it is voided (docs/api.md, "Corrections"), and a key stays
bound to it for as long as it is stored (docs/api.md, "Idempotency"). The process that voids forgets
the calculation (forget_ids); another process may answer its body as it was before the void until
the entry leaves its cache (CALCULATION_CACHE_SIZE bounds it; docs/api.md says so).

It relies on the database never losing a committed calculation: after restoring a backup or
failing over to a replica that may lack the last commits, restart the instances
(docs/operations.md, "PostgreSQL and several instances").
"""
from __future__ import annotations

import hashlib
import threading


class RecentCalculations:
    """Bodies by id, and by idempotency key with the digest of request bytes known to carry that
    key's payload. Bounded: past `size` entries the first remembered go first; size 0 keeps nothing."""

    def __init__(self, size: int):
        self.size = size
        self._by_id: dict[str, tuple[int, str, str]] = {}  # id -> (organization, environment, body)
        self._by_key: dict[tuple[int, str, str], tuple[bytes, str]] = {}  # -> (sha256 of the request, body)
        self._lock = threading.Lock()  # writers only: a reader takes one dict lookup, atomic under the GIL

    def body(self, organization_id: int, environment: str, calculation_id: str) -> str | None:
        """The body if known here; a calculation of another tenant is not known here."""
        found = self._by_id.get(calculation_id)
        if found is None or found[0] != organization_id or found[1] != environment:
            return None
        return found[2]

    def replay(self, organization_id: int, environment: str, idempotency_key: str | None, raw: bytes) -> str | None:
        """The body this key made, when `raw` are the very bytes that were found to carry its payload.

        Such bytes were parsed, validated and found to be the key's payload before, so the answer is
        the replay whatever parsing and validation would say now; for any other bytes, None.
        """
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
        """Forget these calculations' bodies: a void made them again (emissions/voids.py)."""
        if not calculation_ids:
            return
        with self._lock:
            for calculation_id in calculation_ids:
                self._by_id.pop(calculation_id, None)
            # A body begins with its id (calculations.calculation_view): no need to parse it.
            self._by_key = {key: entry for key, entry in self._by_key.items()
                            if not any(calculation_id in entry[1][:50] for calculation_id in calculation_ids)}

    def forget(self) -> None:
        """Keep nothing (as a process that never saw them: another instance, or after a restart)."""
        with self._lock:
            self._by_id.clear()
            self._by_key.clear()
