"""`emissions migrate`, `serve` and `quickstart`: the database brought up to date, and the service run."""
from __future__ import annotations

import json
import os
import secrets
import shlex
import sys

from .. import audit
from .. import clock
from .. import keys
from .. import migrations
from .. import sandbox
from ..config import MAX_WORKERS, Config
from .commands import CommandError, argument, arguments, command, whole_number
from .render import emit

PORT = whole_number(0, 65535)
WORKERS = whole_number(1, MAX_WORKERS)

listening_on = arguments(argument("--host", default="127.0.0.1"), argument("--port", type=PORT, default=8000))


@command("migrate", "apply database migrations", migrates=True)
def migrate(args, config):
    # The text names the database: a relative SQLite path depends on the working directory.
    emit(args, {"applied": args.applied}, f"database: {migrations.database_name(config.database_url)}\n"
         "applied: " + (", ".join(args.applied) or "nothing, up to date"))


@command("serve", "serve the API, workspace and webhook scheduler", migrates=True)
@listening_on
@argument("--workers", type=WORKERS, help="serving processes sharing the port (default: WORKERS, else 1)")
def serve_command(args, config):
    warn_about_secret(config)
    serve(config, args, json_output=args.json)


def warn_about_secret(config: Config) -> None:
    """One warning on stderr when live keys are hashed under the secret kept in the database itself."""
    if config.secret_key:
        return
    live = keys.live_count()
    if live:
        print(f"emissions: warning: SECRET_KEY is unset while {live} live API keys exist: their hashes and the "
              "secret they are keyed with sit in the same database, so a copy of it is enough to test guessed "
              "keys offline (docs/operations.md, Running in production)", file=sys.stderr, flush=True)


def serve(config, args, **options) -> None:
    """Serve on --host/--port; a port that cannot be listened on is one line, not a traceback."""
    from ..serving import server  # Waitress and the app load only for the commands that serve
    from ..serving import workers

    count = getattr(args, "workers", None) or config.workers
    try:
        if count > 1:
            # config.workers tells the app it is one of several processes (the workspace's sign-in uses it).
            workers.serve(config.with_(workers=count), args.host, args.port, count, **options)
        else:
            server.serve(config, host=args.host, port=args.port, **options)
    except server.ListenError as exc:
        raise CommandError(str(exc)) from None


def base_url(host: str, port: int) -> str:
    """Where a browser or curl on this machine reaches a server listening on host:port."""
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def invoked_as() -> str:
    """The `emissions` command as this one was typed (.venv/bin/emissions, python3 emissions.pyz, python -m)."""
    program = sys.argv[0] if sys.argv else ""
    if os.path.basename(program) == "emissions":
        return shlex.quote(program)
    if program.endswith(".pyz"):
        return f"python3 {shlex.quote(program)}"
    if os.path.basename(program) == "__main__.py":  # python -m emissions
        return f"{shlex.quote(sys.executable)} -m emissions"
    return "emissions"


def sign_in_command() -> str:
    """The command that makes a workspace sign-in for the sandbox organization (it asks for a password)."""
    return f"{invoked_as()} user create --org {sandbox.SLUG} --email you@example.com"


def quickstart_curl(key: str, host: str, port: int) -> str:
    """A curl command, ready to paste, that calculates a shipment for the demo customer."""
    body = json.dumps({
        "customer_reference": sandbox.DEMO_CUSTOMER, "external_reference": "shipment-0001", "mode": "ROAD",
        "origin": {"code": "GBLON", "label": "London", "country": "GB"},
        "destination": {"code": "GBMNC", "label": "Manchester", "country": "GB"},
        "cargo": {"value": 12.5, "unit": "tonne"}, "distance": {"value": 320, "unit": "km"},
        "activity_date": clock.today().isoformat(),
        "factor_reference": sandbox.QUICKSTART_FACTOR}, separators=(",", ":"))
    return (f"curl -sS -X POST {base_url(host, port)}/v1/emissions/logistics \\\n"
            f"  -H 'Authorization: Bearer {key}' \\\n"
            f"  -H 'Content-Type: application/json' \\\n"
            f"  -H 'Idempotency-Key: quickstart-{secrets.token_hex(6)}' \\\n"
            f"  -d '{body}'")


def seed_sandbox(config: Config) -> str:
    """The sandbox seeded (sandbox.seed) by the CLI; a new test key's plain value."""
    _, plain = sandbox.seed(actor=audit.CLI_ACTOR, secret_key=config.secret_key, key_name="quickstart")
    return plain


@command("quickstart", "seed a sandbox, print a test key, serve", migrates=True)
@listening_on
def quickstart(args, config):
    """Seed a sandbox (organization, factor library, demo customer, a test key) and serve."""
    plain = seed_sandbox(config)
    # A local sandbox posts its test webhooks to receivers on this machine: private addresses are allowed.
    config = config.with_(webhook_allow_private_test=True)
    if args.json:
        def announce(url: str) -> None:
            print(json.dumps({"organization": sandbox.SLUG, "environment": sandbox.ENVIRONMENT,
                              "customer": sandbox.DEMO_CUSTOMER, "key": plain, "url": url,
                              "curl": quickstart_curl(plain, args.host, args.port),
                              "workspace": f"{url}/workspace", "sign_in": sign_in_command(),
                              "private_test_endpoints": True}),
                  flush=True)

        serve(config, args, json_output=True, announce=announce)
        return
    print(f"""
Sandbox organization: {sandbox.SLUG} (test environment), demo customer: {sandbox.DEMO_CUSTOMER}
Test API key (shown once): {plain}

Try it from another terminal:

{quickstart_curl(plain, args.host, args.port)}

The workspace: {base_url(args.host, args.port)}/workspace
Make a sign-in for it from another terminal, in this directory (it asks for a password):

{sign_in_command()}

Test webhook endpoints may be on this machine or a private network here (WEBHOOK_ALLOW_PRIVATE_TEST
is on for quickstart; `serve` refuses them unless the operator sets it).
""", flush=True)
    serve(config, args)
