"""A signed-in session in the workspace: its cookies, its forms and their CSRF check, the sign-ins
still being checked, and the state every section's pages share (Pages)."""
from __future__ import annotations

import collections
import functools
import hmac
import secrets
import threading
import time
from urllib.parse import parse_qs

import bottle

from .. import accounts
from ..accounts import Session, WorkspaceError
from .flash import Flash
from .rendering import redirect, render, request_id

COOKIE = "emissions_session"
SIGN_IN_COOKIE = "emissions_sign_in"  # the sign-in form's CSRF token (double submit: cookie and field)
PENDING_COOKIE = "emissions_sign_in_pending"  # the ticket of a sign-in whose password is being checked
MAX_FORM_BYTES = 16 * 1024


def read_form() -> dict[str, list[str]]:
    """The urlencoded form of the request, at most MAX_FORM_BYTES; WorkspaceError when unreadable."""
    request = bottle.request
    if request.content_length > MAX_FORM_BYTES:
        raise WorkspaceError("the form is too large")
    raw = request.environ["wsgi.input"].read(request.content_length) if request.content_length > 0 else b""
    try:
        # errors="strict": "%FF" is refused like a raw 0xFF, never stored as U+FFFD.
        form = parse_qs(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=50, errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise WorkspaceError("the form could not be read") from None
    for name, values in form.items():
        if any("\x00" in value for value in values):  # PostgreSQL refuses NUL in text, even in a WHERE
            raise WorkspaceError(f"the form field {name[:50]!r} must not contain NUL characters")
    return form


def field(form: dict, name: str) -> str:
    """The first value of a form field; "" when absent."""
    return (form.get(name) or [""])[0]


class PendingSignIns:
    """Sign-ins whose password check runs on the hashing pool, by the random ticket in the browser's
    cookie; kept in this process for a minute at most (docs/workspace.md, "Sign-in and sessions")."""

    SECONDS = 60

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, future, user_id: int | None, email: str, address: str) -> str:
        ticket = secrets.token_urlsafe(24)
        with self._lock:
            now = self.clock()
            while self._items and next(iter(self._items.values()))[0] < now:
                self._items.popitem(last=False)
            self._items[ticket] = (now + self.SECONDS, future, user_id, email, address)
        return ticket

    def get(self, ticket: str):
        with self._lock:
            found = self._items.get(ticket)
        return found if found and found[0] >= self.clock() else None

    def forget(self, ticket: str) -> None:
        with self._lock:
            self._items.pop(ticket, None)


def signed_in(handler):
    """A page for a signed-in user; without a live session it redirects to sign-in."""

    @functools.wraps(handler)
    def wrapper(self, *args, **kwargs):
        session = self.session()
        if session is None:
            return redirect("/workspace/login")
        return handler(self, session, *args, **kwargs)

    return wrapper


def form_post(handler):
    """A form of a signed-in user, checked against the session's CSRF token."""

    @signed_in
    @functools.wraps(handler)
    def wrapper(self, session: Session, *args, **kwargs):
        try:
            form = read_form()
        except WorkspaceError as exc:
            return render("error", 400, title="The form could not be read", message=str(exc),
                          request_id=request_id(), **self.chrome(session, ""))
        if not hmac.compare_digest(field(form, "csrf").encode(), session.csrf.encode()):
            return redirect("/workspace")
        return handler(self, session, form, *args, **kwargs)

    return wrapper


class Pages:
    """What every section's handlers share: the sessions, the instance secret, the password hasher and
    sign-in throttle, the flash, and the settings the pages read."""

    def __init__(self, sessions: accounts.Sessions, secret: bytes, *, allow_private_live: bool = False,
                 allow_private_test: bool = False,
                 test_capacity: int = 10_000, hasher=None, throttle=None, serving_threads: int = 8,
                 workers: int = 1):
        self.sessions = sessions
        self.secret = secret
        self.allow_private_live = allow_private_live
        self.allow_private_test = allow_private_test
        self.test_capacity = test_capacity
        self.hasher = hasher or accounts.Hasher()
        self.throttle = throttle or accounts.SignInThrottle()
        self.flash = Flash(secret)
        self.pending = PendingSignIns()
        # A sign-in may wait for its password check on a serving thread while the hashing pool cannot
        # hold every serving thread waiting, or while other worker processes answer the API meanwhile
        # (their next request might reach another worker); otherwise (SQLite's one thread) it answers
        # at once and the browser picks the result up from /workspace/login/wait.
        self.wait_inline = serving_threads > self.hasher.capacity or workers > 1

    def session(self) -> Session | None:
        """The live session of the browser's cookie, or None."""
        return self.sessions.read(bottle.request.get_cookie(COOKIE))

    def chrome(self, session: Session, active: str) -> dict:
        """What the layout shows on every page."""
        # Where the environment switch returns: the section's own list page, also when a form's POST
        # (at another URL, like /workspace/password) rendered it.
        return {"session": session, "active": active, "csrf": session.csrf, "environment": session.environment,
                "path": f"/workspace/{active}" if active not in ("", "overview") else "/workspace"}

    def no_such(self, session: Session, active: str, title: str, message: str) -> str:
        """The 404 page of something not found in the session's organization and environment."""
        return render("error", 404, title=title, message=message, request_id=request_id(),
                      **self.chrome(session, active))
