"""Configuration from environment variables, read through small typed readers."""
from __future__ import annotations

import ipaddress
import os
import ssl
from dataclasses import dataclass, replace

from . import postgres

DEFAULT_DATABASE_URL = "sqlite:///emissions.sqlite3"
DEFAULT_TEST_CAPACITY = 10_000  # calculations a month in the sandbox, for organizations without their own
DEFAULT_RETRY_SCHEDULE = (5, 300, 1800, 7200, 18000, 36000, 36000)


def default_threads(database_url: str) -> int:
    """The API's Waitress request threads when THREADS is unset: 1 on SQLite, 8 on PostgreSQL.

    On SQLite a thread waits on nothing slow (the file is local, one writer at a time), and every
    SQLite call hands the interpreter lock to whichever thread wants it: more threads only add
    those hand-overs (docs/performance.md). On PostgreSQL a thread waits on the network, and more
    of them keep the process busy meanwhile.
    """
    return 1 if database_url.startswith("sqlite") else 8


def default_workspace_threads(database_url: str) -> int:
    """The workspace's own request threads when WORKSPACE_THREADS is unset: 1 on SQLite, 2 on PostgreSQL.

    They serve only the workspace (server.DrainingDispatcher), so a download that streams every row
    never holds a thread of the API's. On SQLite one is enough for the same reason as default_threads;
    on PostgreSQL, where a thread waits on the network, a second lets a page be answered while one
    download streams.
    """
    return 1 if database_url.startswith("sqlite") else 2


def default_cache_size(database_url: str) -> int:
    """The calculations a process keeps by default: none on PostgreSQL, where other instances may void
    one that this process would still answer as it was; SQLite's one machine shares the void's mark."""
    return 0 if database_url.startswith(("postgres", "postgresql")) else 10_000


class ConfigError(ValueError):
    """An environment variable holds a value the service cannot use."""


def env_str(name: str, default: str | None = None) -> str | None:
    """A string variable; empty counts as unset."""
    value = os.environ.get(name, "").strip()
    return value or default


def _number(name: str, kind: type, noun: str) -> tuple[int | float | None, str | None]:
    """The variable read as `kind` and its text; (None, None) when unset, a ConfigError naming it when
    it is not `noun`."""
    raw = env_str(name)
    if raw is None:
        return None, None
    try:
        return kind(raw), raw
    except ValueError:
        raise ConfigError(f"{name} must be {noun}, got {raw!r}") from None


def env_int(name: str, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer variable, at least `minimum` and, when given, at most `maximum`."""
    value, _ = _number(name, int, "an integer")
    if value is None:
        return default
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be at most {maximum}, got {value}")
    return value


MAX_WORKERS = 64  # serve --workers takes the same range
MAX_RETENTION_DAYS = 100_000  # prune --older-than takes the same range; beyond it no date can be counted back


def env_float(name: str, default: float, minimum: float = 0.0) -> float:
    """A decimal variable, at least `minimum`."""
    value, raw = _number(name, float, "a number")
    if value is None:
        return default
    if not value >= minimum or value == float("inf"):
        raise ConfigError(f"{name} must be a finite number of at least {minimum}, got {raw}")
    return value


def env_bool(name: str, default: bool) -> bool:
    """A yes/no variable: 1/0, true/false, yes/no, on/off."""
    raw = env_str(name)
    if raw is None:
        return default
    lowered = raw.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def env_schedule(name: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """A comma-separated list of whole seconds, e.g. '5,300,1800'."""
    raw = env_str(name)
    if raw is None:
        return default
    try:
        values = tuple(int(part) for part in raw.split(","))
    except ValueError:
        raise ConfigError(f"{name} must be comma-separated whole seconds, got {raw!r}") from None
    if any(value < 0 for value in values):
        raise ConfigError(f"{name} must not hold negative seconds, got {raw!r}")
    return values


def env_addresses(name: str) -> tuple[str, ...]:
    """A comma-separated list of IP addresses or networks, e.g. '127.0.0.1,10.0.0.0/24'."""
    raw = env_str(name)
    if raw is None:
        return ()
    parts = tuple(part.strip() for part in raw.split(",") if part.strip())
    for part in parts:
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ConfigError(f"{name} must be comma-separated IP addresses or networks, got {part!r}") from None
    return parts


def env_certificates(name: str) -> str | None:
    """A PEM file of CA certificates, checked now: a path that cannot be read or holds no
    certificate is a start-up error, not a failed delivery later."""
    path = env_str(name)
    if path is None:
        return None
    try:
        ssl.create_default_context(cafile=path)
    except FileNotFoundError:
        raise ConfigError(f"{name} names {path}, which does not exist") from None
    except ssl.SSLError as exc:
        raise ConfigError(f"{name} must be a PEM file of CA certificates; {path} is not "
                          f"({exc.reason or exc})") from None
    except OSError as exc:
        raise ConfigError(f"{name} names {path}, which cannot be read ({exc.strerror or exc})") from None
    return path


MIN_SECRET_KEY_LENGTH = 32


def env_secret(name: str) -> str | None:
    """SECRET_KEY: unset, or at least MIN_SECRET_KEY_LENGTH characters (a short one is guessable)."""
    value = env_str(name)
    if value is not None and len(value) < MIN_SECRET_KEY_LENGTH:
        raise ConfigError(f"{name} must be at least {MIN_SECRET_KEY_LENGTH} characters, got {len(value)}; "
                          "generate one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return value


@dataclass(frozen=True)
class Config:
    """Everything the service reads from its environment, with the documented defaults."""

    database_url: str = DEFAULT_DATABASE_URL
    secret_key: str | None = None
    key_cache_seconds: float = 1.0
    rate_limit_per_second: float = 100.0
    rate_limit_burst: int = 200
    test_capacity: int = DEFAULT_TEST_CAPACITY
    webhook_poll_seconds: float = 1.0
    webhook_retry_schedule: tuple[int, ...] = DEFAULT_RETRY_SCHEDULE
    webhook_timeout_seconds: float = 10.0
    webhook_allow_private_live: bool = False
    webhook_allow_private_test: bool = False  # quickstart and the integrators' Sandbox turn it on
    webhook_ca_bundle: str | None = None  # PEM file of CAs trusted beside the default ones
    threads: int | None = None  # None: default_threads(database_url)
    workspace_threads: int | None = None  # None: default_workspace_threads(database_url)
    log_requests: bool = True
    calculation_cache_size: int | None = None  # None: the default for the database (default_cache_size)
    # Serving (docs/operations.md, "Server settings").
    workers: int = 1
    cpu_affinity: str | None = None  # retired, accepted and ignored: serve warns when it is set
    connection_limit: int = 1000
    channel_timeout: int = 30
    backlog: int = 1024
    trusted_proxy: tuple[str, ...] = ()
    trusted_proxy_count: int = 1
    retention_days: int = 0  # 0: the scheduler prunes nothing
    # PostgreSQL's bounded waits (docs/operations.md, "Database timeouts").
    database_connect_timeout: int = 5
    database_statement_timeout: float = 10.0
    database_keepalives_idle: int = 10
    database_keepalives_interval: int = 5
    database_keepalives_count: int = 3
    request_head_timeout: float = 10.0

    @classmethod
    def from_env(cls) -> "Config":
        """Read every variable; a bad value raises ConfigError naming it."""
        cache_size = env_int("CALCULATION_CACHE_SIZE", -1)  # unset: the database's default
        return cls(
            database_url=env_str("DATABASE_URL", DEFAULT_DATABASE_URL),
            secret_key=env_secret("SECRET_KEY"),
            key_cache_seconds=env_float("KEY_CACHE_SECONDS", 1.0),
            rate_limit_per_second=env_float("RATE_LIMIT_PER_SECOND", 100.0),
            rate_limit_burst=env_int("RATE_LIMIT_BURST", 200),
            test_capacity=env_int("TEST_CAPACITY", DEFAULT_TEST_CAPACITY),
            webhook_poll_seconds=env_float("WEBHOOK_POLL_SECONDS", 1.0, minimum=0.01),
            webhook_retry_schedule=env_schedule("WEBHOOK_RETRY_SCHEDULE", DEFAULT_RETRY_SCHEDULE),
            webhook_timeout_seconds=env_float("WEBHOOK_TIMEOUT_SECONDS", 10.0, minimum=0.1),
            webhook_allow_private_live=env_bool("WEBHOOK_ALLOW_PRIVATE_LIVE", False),
            webhook_allow_private_test=env_bool("WEBHOOK_ALLOW_PRIVATE_TEST", False),
            webhook_ca_bundle=env_certificates("WEBHOOK_CA_BUNDLE"),
            threads=env_int("THREADS", 0, minimum=1) or None,
            workspace_threads=env_int("WORKSPACE_THREADS", 0, minimum=1) or None,
            log_requests=env_bool("LOG_REQUESTS", True),
            calculation_cache_size=cache_size if cache_size >= 0 else None,
            workers=env_int("WORKERS", 1, minimum=1, maximum=MAX_WORKERS),
            cpu_affinity=env_str("CPU_AFFINITY"),
            connection_limit=env_int("CONNECTION_LIMIT", 1000, minimum=1),
            channel_timeout=env_int("CHANNEL_TIMEOUT", 30, minimum=1),
            backlog=env_int("BACKLOG", 1024, minimum=1),
            trusted_proxy=env_addresses("TRUSTED_PROXY"),
            trusted_proxy_count=env_int("TRUSTED_PROXY_COUNT", 1, minimum=1),
            retention_days=env_int("RETENTION_DAYS", 0, maximum=MAX_RETENTION_DAYS),
            database_connect_timeout=env_int("DATABASE_CONNECT_TIMEOUT", 5, minimum=2),
            database_statement_timeout=env_float("DATABASE_STATEMENT_TIMEOUT", 10.0, minimum=0.1),
            database_keepalives_idle=env_int("DATABASE_KEEPALIVES_IDLE", 10, minimum=1),
            database_keepalives_interval=env_int("DATABASE_KEEPALIVES_INTERVAL", 5, minimum=1),
            database_keepalives_count=env_int("DATABASE_KEEPALIVES_COUNT", 3, minimum=1),
            request_head_timeout=env_float("REQUEST_HEAD_TIMEOUT", 10.0, minimum=0.1),
        )

    @property
    def kept_calculations(self) -> int:
        """CALCULATION_CACHE_SIZE, or the default for the database (default_cache_size)."""
        return default_cache_size(self.database_url) if self.calculation_cache_size is None \
            else self.calculation_cache_size

    @property
    def serving_threads(self) -> int:
        """THREADS, or the default for the database (default_threads)."""
        return self.threads or default_threads(self.database_url)

    @property
    def workspace_serving_threads(self) -> int:
        """WORKSPACE_THREADS, or the default for the database (default_workspace_threads)."""
        return self.workspace_threads or default_workspace_threads(self.database_url)

    @property
    def postgres_waits(self) -> "postgres.PostgresWaits":
        """The DATABASE_* waits, for db.bind."""
        return postgres.PostgresWaits(self.database_connect_timeout, self.database_statement_timeout,
                                      self.database_keepalives_idle, self.database_keepalives_interval,
                                      self.database_keepalives_count)

    def with_(self, **changes) -> "Config":
        """A copy with some values changed (tests use it)."""
        return replace(self, **changes)
