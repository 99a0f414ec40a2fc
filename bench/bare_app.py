"""The framework's ceiling: a bare Bottle app on Waitress answering a trivial JSON POST and GET.

Served with the same Waitress settings as `emissions serve` (thread count, body limit), so the
ratio of the service to this app is the cost of the service's own work per request.
"""
from __future__ import annotations

import argparse
import json
import logging
import signal

import bottle
import waitress


def build() -> bottle.Bottle:
    """Two routes: POST parses a JSON body and answers JSON; GET answers a fixed JSON object."""
    app = bottle.Bottle()

    @app.post("/bare")
    def bare_post():
        body = json.loads(bottle.request.body.read())
        bottle.response.status = 201
        bottle.response.content_type = "application/json"
        return json.dumps({"received": len(body), "status": "ok"})

    @app.get("/bare")
    def bare_get():
        bottle.response.content_type = "application/json"
        return json.dumps({"status": "ok"})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--threads", type=int, default=8)
    serve(build(), parser.parse_args(), "bare")


def serve(app: bottle.Bottle, args: argparse.Namespace, ident: str) -> None:
    """Serve `app` on stock Waitress at args.host:args.port with args.threads until SIGTERM or Ctrl-C."""
    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    # Waitress warns "Task queue depth is N" for nearly every request under load. The service
    # drops all but one such record per 10 s; here every one is dropped, so that the baseline
    # never pays for writing them (each would otherwise be a write to stderr).
    logging.getLogger("waitress.queue").addFilter(lambda record: False)
    server = waitress.create_server(app, host=args.host, port=args.port, threads=args.threads,
                                    max_request_body_size=1024 * 1024, ident=ident)
    print(f"Serving on http://{args.host}:{server.effective_port} (threads={args.threads})", flush=True)
    try:
        server.run()
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
