"""Running the service: Waitress, the webhook scheduler, clean shutdown on SIGTERM."""
from __future__ import annotations

import logging
import signal
import sys

import waitress

import scheduler as webhook_scheduler
from app import create_app
from config import Config


def _configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in ("emissions.access", "emissions.error", "emissions.webhooks"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def serve(config: Config, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until SIGTERM or Ctrl-C; in-flight requests finish, then the scheduler stops."""
    _configure_logging()
    app = create_app(config)
    scheduler = webhook_scheduler.start(config)

    def stop(signum, frame):
        raise SystemExit(0)  # Waitress catches it, closes its sockets and drains its threads

    signal.signal(signal.SIGTERM, stop)
    server = waitress.create_server(app, host=host, port=port, threads=config.threads,
                                    max_request_body_size=1024 * 1024, ident="emissions")
    print(f"Serving on http://{host}:{server.effective_port} (threads={config.threads})", flush=True)
    try:
        server.run()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        server.close()
        scheduler.shutdown(wait=True)
        print("Stopped.", flush=True)
