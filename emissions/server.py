"""Running the service: Waitress, the webhook scheduler, clean shutdown on SIGTERM."""
from __future__ import annotations

import json
import signal
import sys
import uuid

import waitress
from waitress.channel import HTTPChannel
from waitress.task import ErrorTask

from . import jsoncodec
from . import logs
from . import models

from . import scheduler as webhook_scheduler
from .app import SECURITY_HEADERS, create_app
from .config import Config


MAX_WAITRESS_BODY = 1024 * 1024  # Waitress refuses larger bodies before the app sees them


class EnvelopeErrorTask(ErrorTask):
    """Waitress's own refusals (malformed HTTP, a body over its limit) in the API's error envelope."""

    def execute(self):
        error = self.request.error
        request_id = str(uuid.uuid4())
        status = f"{error.code} {error.reason}"
        if error.code == 413:
            message = "The request body is larger than 64 KiB."
        elif error.code == 501:
            # Waitress's 501 is only ever a Transfer-Encoding other than chunked: the client's to
            # change, so a 400 (a 5xx tells clients to retry the same request, here in vain).
            status, message = "400 Bad Request", ("The Transfer-Encoding is not supported; send the body with "
                                                  "Content-Length or Transfer-Encoding: chunked.")
        else:
            message = f"The HTTP request could not be read: {error.reason.lower()}."
        code = "INVALID_REQUEST" if int(status[:3]) < 500 else "INTERNAL_ERROR"
        body = jsoncodec.dumps({"error": {"code": code, "message": message, "request_id": request_id}}).encode()
        self.status = status
        self.response_headers.extend([("Content-Type", "application/json"), ("X-Request-Id", request_id),
                                      *SECURITY_HEADERS])
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class EnvelopeChannel(HTTPChannel):
    error_task_class = EnvelopeErrorTask


def create_server(app, host: str, port: int, threads: int):
    """A Waitress server for the app, answering even the requests it cannot parse with the envelope."""
    server = waitress.create_server(app, host=host, port=port, threads=threads,
                                    max_request_body_size=MAX_WAITRESS_BODY, ident="emissions")
    server.channel_class = EnvelopeChannel
    return server


class ListenError(RuntimeError):
    """The address cannot be listened on (taken, or not this machine's)."""


def serve(config: Config, host: str = "127.0.0.1", port: int = 8000, *, json_output: bool = False,
          announce=None) -> None:
    """Serve until SIGTERM or Ctrl-C; in-flight requests finish, then the scheduler stops.

    Once listening it calls announce(url), or prints where it serves: a text line, or with
    json_output one JSON object, in which case every other line goes to stderr.
    """
    log_writer = logs.configure(queued=True)
    try:
        _serve(config, host, port, json_output, announce)
    finally:
        log_writer.stop()  # writes what is still queued


def _serve(config: Config, host: str, port: int, json_output: bool, announce) -> None:
    app = create_app(config)
    try:
        server = create_server(app, host, port, config.serving_threads)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except ValueError as exc:  # Waitress: a host that is no address ("256.1.1.1")
        raise ListenError(f"cannot listen on {host}:{port}: {exc}") from None
    scheduler = webhook_scheduler.start(config)
    checkpointer = models.WalCheckpointer(models.db.obj).start() if models.is_sqlite() else None

    def stop(signum, frame):
        raise SystemExit(0)  # Waitress catches it, closes its sockets and drains its threads

    signal.signal(signal.SIGTERM, stop)
    url = f"http://{host}:{server.effective_port}"
    try:  # from here a SIGTERM at any moment still ends in the cleanup below
        if announce is not None:
            announce(url)
        elif json_output:
            print(json.dumps({"url": url, "threads": config.serving_threads}), flush=True)
        else:
            print(f"Serving on {url} (threads={config.serving_threads})", flush=True)
        server.run()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        server.close()
        scheduler.shutdown(wait=True)
        if checkpointer is not None:
            checkpointer.stop()
        print("Stopped.", file=sys.stderr if json_output else sys.stdout, flush=True)
