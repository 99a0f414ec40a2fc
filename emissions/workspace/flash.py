"""What a page shows once after a POST-redirect-GET, sealed between the database and the browser's cookie."""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets

import bottle

from ..models import WorkspaceFlash, utcnow
from ..accounts import Session
from .rendering import cookie_header


class Flash:
    """What a page shows once after a POST-redirect-GET: a new key, a new signing secret, a notice.

    The redirect may reach another worker or instance, so the value waits in the database
    (workspace_flash), for five minutes at most, and is deleted when shown. It is stored sealed: its
    JSON XOR a one-time pad of random bytes, and the pad is only in the browser's cookie, so neither
    the database (nor a backup of it) nor the cookie alone holds the key or secret it shows. An HMAC
    of the value under the instance secret, kept beside it, refuses any pad but the one given.
    """

    SECONDS = 300
    COOKIE_VALUE = re.compile(r"([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{1,3000})")

    def __init__(self, secret: bytes, clock=utcnow):
        self.key = hmac.new(secret, b"workspace-flash", hashlib.sha256).digest()
        self.clock = clock

    @staticmethod
    def cookie_name(kind: str) -> str:
        return f"emissions_flash_{kind}"

    def _tag(self, flash_id: str, kind: str, text: bytes) -> str:
        return hmac.new(self.key, f"{flash_id}.{kind}.".encode() + text, hashlib.sha256).hexdigest()

    MOST_BYTES = 2000  # the value's JSON at most: its pad must fit a cookie (COOKIE_VALUE)

    def put(self, session: Session, kind: str, value: dict) -> None:
        """Keep `value` for the session's next page of this kind; sets the cookie on the response.
        For a secret, call it in the transaction that makes the secret, so that none is made unshown
        (a value too long for a cookie is a ValueError there)."""
        text = json.dumps(value, ensure_ascii=False).encode()
        if len(text) > self.MOST_BYTES:
            raise ValueError("what it would show is too long to be shown once")
        pad = secrets.token_bytes(len(text))
        flash_id = secrets.token_urlsafe(16)
        WorkspaceFlash.create(id=flash_id, session=session.id, kind=kind,
                              sealed=f"{self._tag(flash_id, kind, text)}.{_xor(text, pad).hex()}",
                              expires_at=self.clock() + dt.timedelta(seconds=self.SECONDS))
        sealing = base64.urlsafe_b64encode(pad).decode().rstrip("=")
        bottle.response.add_header("Set-Cookie", cookie_header(self.cookie_name(kind), f"{flash_id}.{sealing}",
                                                               self.SECONDS))

    def put_notice(self, session: Session, text: str) -> None:
        """A line of text the section's page shows once (kind "notice")."""
        self.put(session, "notice", {"text": text})

    def take_notice(self, session: Session) -> str:
        """The notice put for this session, once; "" when there is none."""
        return (self.take(session, "notice") or {}).get("text", "")

    def take(self, session: Session, kind: str) -> dict | None:
        """The value put for this session and kind, once; None when there is none (or it expired)."""
        cookie = bottle.request.get_cookie(self.cookie_name(kind)) or ""
        if not cookie:
            return None
        bottle.response.add_header("Set-Cookie", cookie_header(self.cookie_name(kind), "", 0))
        found = self.COOKIE_VALUE.fullmatch(cookie)
        if found is None:
            return None
        flash_id, sealing = found.groups()
        # Rows never shown go with the next take, in a statement of its own (in put() it would hold
        # them locked for the transaction of the change on PostgreSQL).
        WorkspaceFlash.delete().where(WorkspaceFlash.expires_at <= self.clock()).execute()
        row = WorkspaceFlash.get_or_none((WorkspaceFlash.id == flash_id) & (WorkspaceFlash.session == session.id)
                                         & (WorkspaceFlash.kind == kind))
        # Deleted by whoever shows it: of two requests at once, one. A wrong pad uses it up as well.
        if row is None or WorkspaceFlash.delete().where(WorkspaceFlash.id == row.id).execute() != 1:
            return None
        tag, _, sealed_hex = row.sealed.partition(".")
        try:
            pad = base64.urlsafe_b64decode(sealing + "=" * (-len(sealing) % 4))
            sealed = bytes.fromhex(sealed_hex)
        except ValueError:
            return None
        text = _xor(sealed, pad)
        if (row.expires_at <= self.clock() or len(pad) != len(sealed)
                or not hmac.compare_digest(tag, self._tag(flash_id, kind, text))):
            return None
        value = json.loads(text)
        return value if isinstance(value, dict) else None


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad))
