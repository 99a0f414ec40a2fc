"""Users and their passwords, the hashing pool, sign-in throttling and server-side sessions: the core the
workspace signs people in with, and organizations and the operator CLI manage users with."""
from __future__ import annotations

import collections
import datetime as dt
import functools
import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import jwt
import peewee as pw

from . import audit
from . import text
from .db import db
from .models import Organization, User, WorkspaceSession, utcnow

SESSION_HOURS = 8
# scrypt: memory-hard, so a stolen hash is slow to guess on any hardware; n=2**14 keeps a sign-in quick.
SCRYPT = {"n": 2 ** 14, "r": 8, "p": 1, "dklen": 32}
MIN_PASSWORD = 12
MAX_PASSWORD = 1024
MAX_EMAIL = 254  # the longest address SMTP delivers to; longer ones are refused before anything is kept


class WorkspaceError(ValueError):
    """A user-facing problem with a workspace form or a login."""


# --- passwords -------------------------------------------------------------------------------------

def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, **SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    try:
        _, salt, digest = stored.split("$")
        candidate = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), **SCRYPT)
    except ValueError:
        return False
    return hmac.compare_digest(candidate.hex().encode(), digest.encode())


@functools.lru_cache(maxsize=1)
def _dummy_hash() -> str:
    """A fixed hash to check against when the email is unknown, so both cases take the same time; made
    on the first sign-in, not at import (every CLI command imports this module)."""
    return hash_password(secrets.token_hex(8))


def password_problem(password: str) -> str | None:
    if len(password) < MIN_PASSWORD:
        return f"password must be at least {MIN_PASSWORD} characters"
    if len(password) > MAX_PASSWORD:
        return f"password must be at most {MAX_PASSWORD} characters"
    return None


class HashingBusy(Exception):
    """Every hashing slot is taken; try again after `retry_after` seconds."""

    def __init__(self, retry_after: int = 1):
        super().__init__("password hashing is busy")
        self.retry_after = retry_after


class Hasher:
    """Runs scrypt on a small pool of its own, never on more than `workers` threads at once, with at
    most `queue` more waiting; beyond that it refuses at once (HashingBusy) instead of queueing."""

    def __init__(self, workers: int = 1, queue: int = 2, timeout: float = 10.0):
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="password-hash")
        self._slots = threading.BoundedSemaphore(workers + queue)
        self.timeout = timeout
        self.capacity = workers + queue

    def submit(self, function, *args) -> Future:
        """Start function(*args) on the pool, or raise HashingBusy when every slot is taken."""
        if not self._slots.acquire(blocking=False):
            raise HashingBusy()
        try:
            future = self._pool.submit(function, *args)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        return future

    def wait(self, future: Future):
        """The answer of a submitted hash; one not done within `timeout` is HashingBusy too."""
        try:
            return future.result(timeout=self.timeout)
        except FutureTimeout:
            raise HashingBusy() from None

    def run(self, function, *args):
        """submit() and wait for the answer (the calling thread waits; it does not hash)."""
        return self.wait(self.submit(function, *args))

    def hash(self, password: str) -> str:
        return self.run(hash_password, password)

    def check(self, password: str, stored: str) -> bool:
        return self.run(check_password, password, stored)


class Inline:
    """A Hasher that hashes on the calling thread (the CLI, which answers no API request)."""

    @staticmethod
    def hash(password: str) -> str:
        return hash_password(password)

    @staticmethod
    def check(password: str, stored: str) -> bool:
        return check_password(password, stored)


# --- users ---------------------------------------------------------------------------------------

def normal_email(email: str) -> str:
    return email.strip().lower()


def create_user(organization: Organization, email: str, password: str, hasher=Inline, *, actor: str) -> User:
    """A workspace login for one organization, recorded as `user.created` in the same transaction
    (the password is hashed before the transaction begins, never inside it)."""
    email = normal_email(email)
    if len(email) > MAX_EMAIL or not re.fullmatch(r"[^@\s]+@[^@\s]+", email):
        raise WorkspaceError("email must be an address")
    if text.problem(email):
        raise WorkspaceError("email " + text.problem(email))
    problem = password_problem(password)
    if problem:
        raise WorkspaceError(problem)
    password_hash = hasher.hash(password)
    try:
        with db.atomic():
            user = User.create(organization=organization, email=email, password_hash=password_hash)
            audit.record("user.created", user.email, actor=actor, organization=organization)
            return user
    except pw.IntegrityError:
        raise WorkspaceError(f"a user with email {email} already exists") from None


def find_user(email: str) -> User | None:
    email = normal_email(email)
    if len(email) > MAX_EMAIL:
        return None
    return User.get_or_none(User.email == email)


def find_user_by_id(user_id: int) -> User | None:
    """The user with this id, or None."""
    return User.get_or_none(User.id == user_id)


def member(organization: Organization, user_id: int) -> User | None:
    """The organization's user with this id, or None (another organization's is None too)."""
    return User.get_or_none((User.id == user_id) & (User.organization == organization.id))


def users(organization: Organization | None = None) -> list[User]:
    """The users of one organization, or of all, by organization slug and email (organization joined)."""
    query = User.select(User, Organization).join(Organization).order_by(Organization.slug, User.email)
    if organization is not None:
        query = query.where(User.organization == organization.id)
    return list(query)


def password_check(email: str, password: str) -> tuple[User | None, tuple[str, str]]:
    """The user of this email (or None) and the (password, stored hash) to check: an unknown email is
    checked against a dummy hash, so that it costs the same time as a wrong password."""
    user = find_user(email)
    if user is None or len(password) > MAX_PASSWORD:
        return None, (password[:MAX_PASSWORD], _dummy_hash())
    return user, (password, user.password_hash)


def authenticate_user(email: str, password: str, hasher=Inline) -> User | None:
    """The user whose email and password these are, or None."""
    user, (candidate, stored) = password_check(email, password)
    return user if hasher.check(candidate, stored) and user is not None else None


def set_password(user: User, password: str, hasher=Inline, *, actor: str) -> None:
    """Change the password and end every session of the user, recorded as `user.password_changed`."""
    problem = password_problem(password)
    if problem:
        raise WorkspaceError(problem)
    password_hash = hasher.hash(password)
    with db.atomic():
        User.update(password_hash=password_hash).where(User.id == user.id).execute()
        WorkspaceSession.delete().where(WorkspaceSession.user == user.id).execute()
        audit.record("user.password_changed", user.email, actor=actor, organization=user.organization_id)
    user.password_hash = password_hash


def end_sessions_of(organization_id: int) -> int:
    """End every workspace session of the organization's users (on suspension: a cookie taken before
    it must not work again after a reactivation); how many ended. Runs in the caller's transaction."""
    members = User.select(User.id).where(User.organization == organization_id)
    return WorkspaceSession.delete().where(WorkspaceSession.user.in_(members)).execute()


def delete_user(user: User, *, actor: str) -> None:
    """Remove the login, recorded as `user.deleted`; its sessions end with it."""
    with db.atomic():
        WorkspaceSession.delete().where(WorkspaceSession.user == user.id).execute()
        User.delete().where(User.id == user.id).execute()
        audit.record("user.deleted", user.email, actor=actor, organization=user.organization_id)


# --- sign-in throttling --------------------------------------------------------------------------

class Throttle:
    """Token buckets per key (rate a second, up to burst) in a bounded, expiring table.

    A bucket that has filled up again is as good as none, so it is dropped; past `max_keys` the
    least recently used bucket goes first. Memory stays bounded whatever keys an attacker sends.
    """

    def __init__(self, rate: float, burst: int, max_keys: int = 20_000, clock=time.monotonic):
        self.rate, self.burst, self.max_keys, self.clock = rate, burst, max_keys, clock
        self._buckets: collections.OrderedDict = collections.OrderedDict()  # key -> (tokens, updated)
        self._lock = threading.Lock()

    def take(self, key) -> int:
        """0 when the attempt may go ahead (a token is taken), else the seconds to wait."""
        with self._lock:
            now = self.clock()
            tokens, updated = self._buckets.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + max(0.0, now - updated) * self.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                wait = 0
            else:
                self._buckets[key] = (tokens, now)
                wait = max(1, math.ceil((1 - tokens) / self.rate))
            self._expire(now)
            return wait

    def forget(self, key) -> None:
        with self._lock:
            self._buckets.pop(key, None)

    def __len__(self) -> int:
        return len(self._buckets)

    def _expire(self, now: float) -> None:
        # Oldest first: a bucket untouched for long enough to refill is dropped.
        refill_seconds = self.burst / self.rate
        while self._buckets:
            key, (tokens, updated) = next(iter(self._buckets.items()))
            if len(self._buckets) <= self.max_keys and now - updated < refill_seconds:
                break
            del self._buckets[key]


SIGN_IN_BURST = 10  # attempts per (email, client address), then one per 30 s
SIGN_IN_ADDRESS_BURST = 30  # attempts per client address, whatever the emails, then one per 3 s


class SignInThrottle:
    """Slows guessing without locking the real user out from elsewhere: a strict bucket per
    (email, client address) and a looser one per client address. No bucket is per email alone,
    so wrong passwords sent from one address never block the same email from another."""

    def __init__(self, clock=time.monotonic):
        self.by_email_and_address = Throttle(1 / 30, SIGN_IN_BURST, clock=clock)
        self.by_address = Throttle(1 / 3, SIGN_IN_ADDRESS_BURST, clock=clock)

    def wait(self, email: str, address: str) -> int:
        """0 when this attempt may be checked, else the seconds to wait before the next."""
        return self.by_address.take(address) or self.by_email_and_address.take((email, address))

    def succeeded(self, email: str, address: str) -> None:
        self.by_email_and_address.forget((email, address))


# --- sessions --------------------------------------------------------------------------------------

SESSION_ID = re.compile(r"[A-Za-z0-9_-]{32,64}")


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Session:
    """A signed-in user as the pages see them."""

    def __init__(self, row: WorkspaceSession, user: User, organization: Organization):
        self.id, self.csrf, self.environment = row.id, row.csrf, row.environment
        self.user, self.organization = user, organization

    @property
    def actor(self) -> str:
        return f"user:{self.user.email}"


class Sessions:
    """Signed session tokens (JWT, HS256) naming a row of workspace_session; the row is the truth."""

    def __init__(self, instance_secret: bytes, clock=utcnow):
        # A key of its own, derived from the instance secret, so tokens never double as key hashes.
        self.key = hmac.new(instance_secret, b"workspace-session", hashlib.sha256).digest()
        self.clock = clock

    def issue(self, user: User, environment: str = "test") -> str:
        """Start a session for the user; return its token for the cookie."""
        now = self.clock()
        session_id = secrets.token_urlsafe(32)
        expires = now + dt.timedelta(hours=SESSION_HOURS)
        with db.atomic():
            WorkspaceSession.create(id=_digest(session_id), user=user, csrf=secrets.token_urlsafe(24),
                                    environment=environment, created_at=now, expires_at=expires)
            User.update(last_sign_in_at=now).where(User.id == user.id).execute()
            # Old rows of this user are swept here, so the table holds only live sessions and a few.
            WorkspaceSession.delete().where((WorkspaceSession.user == user.id)
                                            & (WorkspaceSession.expires_at <= now)).execute()
        claims = {"sid": session_id, "sub": str(user.id), "iat": int(now.timestamp()),
                  "exp": int(expires.timestamp())}
        return jwt.encode(claims, self.key, algorithm="HS256")

    def _session_id(self, token: str | None) -> str | None:
        if not token or len(token) > 1024:
            return None
        try:
            # The expiry is checked below against the service's clock, not PyJWT's reading of the machine's.
            claims = jwt.decode(token, self.key, algorithms=["HS256"],
                                options={"require": ["exp", "sid"], "verify_exp": False, "verify_iat": False})
        except jwt.PyJWTError:
            return None
        session_id = claims.get("sid")
        if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
            return None
        if type(claims.get("exp")) is not int or claims["exp"] <= self.clock().timestamp():
            return None
        return session_id

    def read(self, token: str | None) -> Session | None:
        """The live session the token names, while its user exists and its organization is active."""
        session_id = self._session_id(token)
        if session_id is None:
            return None
        row = (WorkspaceSession.select(WorkspaceSession, User, Organization)
               .join(User).join(Organization)
               .where((WorkspaceSession.id == _digest(session_id))
                      & (WorkspaceSession.expires_at > self.clock())
                      & (Organization.status == "active"))
               .first())
        if row is None:
            return None
        return Session(row, row.user, row.user.organization)

    def end(self, token: str | None) -> None:
        """Sign out: the session's row goes, so the token opens nothing any more."""
        session_id = self._session_id(token)
        if session_id is not None:
            WorkspaceSession.delete().where(WorkspaceSession.id == _digest(session_id)).execute()

    @staticmethod
    def switch_environment(session: Session, environment: str) -> None:
        WorkspaceSession.update(environment=environment).where(WorkspaceSession.id == session.id).execute()
