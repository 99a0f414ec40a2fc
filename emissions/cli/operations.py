"""`emissions backup`, `audit` and `deliver`: running the service in production (docs/cli-operations.md)."""
from __future__ import annotations

import signal

from .. import audit as audit_trail
from .. import backup as backups
from .. import logs
from ..webhooks import delivery as webhook_delivery
from .commands import CommandError, argument, command
from .render import emit, prose, table
from .values import organization

MAX_AUDIT_LISTED = 10_000


@command("backup", "copy the live SQLite database consistently to PATH", database_must_exist=True)
@argument("path")
def backup(args, config):
    copied = backups.backup(args.path)
    emit(args, copied,
         f"copied {copied['calculations']:,} calculations to {copied['path']} ({copied['bytes']:,} bytes)")


@command("audit", "administrative actions, newest first")
@argument("--org", help="only this organization")
@argument("--limit", type=int, default=50)
def audit(args, config):
    if not 1 <= args.limit <= MAX_AUDIT_LISTED:
        raise CommandError(f"--limit must be at least 1 and at most {MAX_AUDIT_LISTED}")
    org = organization(args.org) if args.org else None
    events = [event.to_dict() for event in audit_trail.recent(org, args.limit)]
    emit(args, {"events": events}, table(
        events, lambda e: f"{e['time']}  {e['actor']}  {e['action']}  {e['target']}  {e['organization'] or '-'}"
                          f"{'/' + e['environment'] if e['environment'] else ''}"
                          + (f"  ({prose(e['details'])})" if e["details"] else ""),
        "no audit events"))


@command("deliver", "deliver due webhooks until stopped (or --once)")
@argument("--once", action="store_true", help="deliver what is due now, then exit")
def deliver(args, config):
    """Deliver due webhooks: once (--once), or every WEBHOOK_POLL_SECONDS until SIGTERM or Ctrl-C."""
    deliverer = webhook_delivery.Deliverer(config)
    try:
        if args.once:
            emit(args, deliverer.run_once())
            return
        logs.configure()
        signal.signal(signal.SIGTERM, lambda signum, frame: deliverer.stop())
        signal.signal(signal.SIGINT, lambda signum, frame: deliverer.stop())
        print(f"Delivering webhooks every {config.webhook_poll_seconds} s", flush=True)
        deliverer.run_forever(config.webhook_poll_seconds)
        print("Stopped.", flush=True)
    finally:
        deliverer.close()
