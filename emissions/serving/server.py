"""Running the service: Waitress, the webhook scheduler, the WAL checkpointer, clean shutdown on SIGTERM."""
from __future__ import annotations

import json
import logging
import signal
import sys

import waitress

from .. import logs
from .. import scheduler as webhook_scheduler
from ..app import create_app
from ..config import Config
from ..db import db, is_sqlite
from . import proxies
from .adaptations import DrainingDispatcher, EnvelopeChannel, close_listeners, enforce_head_deadline
from .wal_checkpoint import WalCheckpointer


MAX_WAITRESS_BODY = 1024 * 1024  # Waitress refuses larger bodies before the app sees them


def create_server(app, host: str | None, port: int | None, threads: int, config: Config | None = None,
                  sockets: list | None = None):
    """A Waitress server for the app, answering even the requests it cannot parse with the envelope.

    `threads` serve the API; the workspace has its own (DrainingDispatcher), as many as the config's
    workspace_serving_threads. The connection settings come from the config (docs/operations.md,
    "Server settings"); with `sockets`, it serves on those (bound already) instead of host and port.
    """
    settings = config or getattr(app, "settings", None) or Config()
    where = {"sockets": sockets} if sockets else {"host": host, "port": port}
    dispatcher = DrainingDispatcher()
    server = waitress.create_server(
        proxies.trusting(app, settings.trusted_proxy, settings.trusted_proxy_count), **where,
        threads=threads, max_request_body_size=MAX_WAITRESS_BODY, ident="emissions",
        connection_limit=settings.connection_limit, channel_timeout=settings.channel_timeout,
        # Idle channels and slow heads are looked for every second: a deadline is kept within one.
        cleanup_interval=1, backlog=settings.backlog,
        # select() cannot watch a socket numbered above 1023; poll() has no such limit.
        asyncore_use_poll=True,
        # proxies.trusting() has already cleared the forwarding headers of untrusted peers.
        clear_untrusted_proxy_headers=False,
        _dispatcher=dispatcher)  # Waitress private parameter: the only way to give it the two draining lanes
    dispatcher.set_thread_count(threads)  # what create_server does for a dispatcher of its own making
    dispatcher.workspace.set_thread_count(settings.workspace_serving_threads)
    dispatcher.before_drain = lambda: close_listeners(server)
    server.channel_class = EnvelopeChannel  # Waitress hook: each connection's channel is made from it
    enforce_head_deadline(server, settings.request_head_timeout)
    return server


class ListenError(RuntimeError):
    """The address cannot be listened on (taken, or not this machine's)."""


def warn_about_retired_settings(config: Config) -> None:
    """One line in the error log for a setting that is accepted and ignored, so that an operator's
    configuration keeps starting (docs/operations.md, "Server settings")."""
    if config.cpu_affinity is not None:
        logging.getLogger("emissions.error").warning(
            "CPU_AFFINITY=%s is ignored: serve no longer pins its processes to CPUs; pin the service "
            'from outside instead (docs/operations.md, "Several workers")', config.cpu_affinity)


def serve(config: Config, host: str = "127.0.0.1", port: int = 8000, *, json_output: bool = False,
          announce=None, worker=None) -> None:
    """Serve until SIGTERM or Ctrl-C; in-flight requests finish, then the scheduler stops.

    Once listening it calls announce(url), or prints where it serves: a text line, or with
    json_output one JSON object, in which case every other line goes to stderr. A `worker` of
    `emissions serve --workers N` (workers.Worker) serves on its own socket and prints nothing.
    """
    log_writer = logs.configure(queued=True)
    try:
        _serve(config, host, port, json_output, announce, worker)
    finally:
        log_writer.stop()  # writes what is still queued


def _serve(config: Config, host: str, port: int, json_output: bool, announce, worker=None) -> None:
    app = create_app(config)
    try:
        server = create_server(app, host, port, config.serving_threads, config,
                               sockets=[worker.socket] if worker else None)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except ValueError as exc:  # Waitress: a host that is no address ("256.1.1.1")
        raise ListenError(f"cannot listen on {host}:{port}: {exc}") from None
    if worker is None or worker.runs_scheduler:  # one warning, from one process of several
        warn_about_retired_settings(config)
    # Of several workers, one runs the scheduler (its claims would be safe in all, but idle polls add up).
    scheduler = webhook_scheduler.start(config) if worker is None or worker.runs_scheduler else None
    checkpointer = WalCheckpointer(db.obj).start() if is_sqlite() else None

    def stop(signum, frame):
        # A second signal must not cut short what follows: the queued requests' answers, the cleanup.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise SystemExit(0)  # Waitress catches it, closes its sockets and drains its threads

    signal.signal(signal.SIGTERM, stop)
    if worker is None:  # Ctrl-C too (workers ignore SIGINT: their parent stops them with SIGTERM)
        signal.signal(signal.SIGINT, stop)
    url = f"http://{host}:{server.effective_port}"
    try:  # from here a SIGTERM at any moment still ends in the cleanup below
        if announce is not None:
            announce(url)
        elif json_output:
            # "cpu" stays, always null, so that scripts reading it keep working (docs/cli.md).
            print(json.dumps({"url": url, "threads": config.serving_threads, "cpu": None}), flush=True)
        else:
            print(f"Serving on {url} (threads={config.serving_threads})", flush=True)
        server.run()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        server.close()
        if scheduler is not None:
            scheduler.shutdown(wait=True)
        if checkpointer is not None:
            checkpointer.stop()
        if worker is None:
            print("Stopped.", file=sys.stderr if json_output else sys.stdout, flush=True)
