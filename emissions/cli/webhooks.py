"""`emissions webhook ...` and `emissions prune`: the webhook endpoint, its deliveries and their retention."""
from __future__ import annotations

import datetime as dt

from .. import audit
from .. import models
from ..config import MAX_RETENTION_DAYS
from ..webhooks import endpoints as webhook_endpoints
from ..webhooks import events as webhook_events
from ..webhooks import signing as webhook_signing
from .commands import ENVIRONMENTS, CommandError, argument, arguments, command, group, whole_number
from .render import emit, warn
from .values import organization, parse_timestamp

MAX_DELIVERIES_LISTED = 10_000

hooks = group("webhook", "the webhook endpoint and its deliveries")

endpoint_of = arguments(argument("--org", required=True), argument("--env", required=True, choices=ENVIRONMENTS))


@hooks.command("set", "set the endpoint URL (a new secret, shown once)")
@endpoint_of
@argument("--url", required=True)
@argument("--signature", choices=webhook_signing.SCHEMES,
          help="service: the X-Service-Webhook-* headers (a new endpoint's default); standard: "
               "Standard Webhooks (webhook-id, -timestamp, -signature); unset: keep the endpoint's")
def webhook_set(args, config):
    org = organization(args.org)
    previous = webhook_endpoints.endpoint_for(org.id, args.env)
    endpoint, secret = webhook_endpoints.set_endpoint(org.id, args.env, args.url, actor=audit.CLI_ACTOR,
                                                      allow_private_live=config.webhook_allow_private_live,
                                                      allow_private_test=config.webhook_allow_private_test,
                                                      signature=args.signature)
    if previous is not None and previous.status == "disabled":
        skipped = webhook_events.skipped_since(org.id, args.env, previous.updated_at)
        if skipped:
            warn(f"{skipped} events were skipped while the endpoint was disabled; "
                 f"`emissions webhook redeliver --since {models.isoformat(previous.updated_at)} --status skipped "
                 f"--org {org.slug} --env {args.env}` sends them")
    emit(args, {"url": endpoint.url, "secret": secret, "signature": endpoint.signature},
         f"{endpoint.url}\nsecret: {secret}\nsignature: {endpoint.signature}\n"
         "(shown once: store it where the receiver reads it)")


@hooks.command("rotate", "give the endpoint a new secret (shown once), signed beside the current one for an overlap")
@endpoint_of
@argument("--overlap", type=float, default=webhook_endpoints.DEFAULT_OVERLAP_HOURS, metavar="HOURS",
          help="hours both secrets sign deliveries (default "
               f"{webhook_endpoints.DEFAULT_OVERLAP_HOURS}, at most "
               f"{webhook_endpoints.MAX_OVERLAP_HOURS}; 0: switch at once)")
def webhook_rotate(args, config):
    org = organization(args.org)
    endpoint, secret = webhook_endpoints.rotate_secret(org.id, args.env, actor=audit.CLI_ACTOR,
                                                       overlap_hours=args.overlap)
    ends = models.isoformat(endpoint.overlap_ends_at)
    carrier = ("a second webhook-signature" if endpoint.signature == "standard"
               else "X-Service-Webhook-Signature-Next")
    emit(args, {"url": endpoint.url, "secret": secret, "overlap_ends_at": ends},
         f"{endpoint.url}\nsecret: {secret}\n(shown once; " + (
             f"until {ends} attempts carry {carrier} under it beside the current "
             f"signature, then it is the only one; `emissions webhook end-overlap` switches now)" if ends
             else "attempts from now on are signed with it only)"))


@hooks.command("end-overlap", "end a rotation's overlap now: the new secret becomes the only one")
@endpoint_of
def webhook_end_overlap(args, config):
    org = organization(args.org)
    endpoint = webhook_endpoints.end_overlap(org.id, args.env, actor=audit.CLI_ACTOR)
    emit(args, {"url": endpoint.url, "overlap_ended": True},
         f"{endpoint.url}: the new secret is now the only one")


@hooks.command("remove", "remove the endpoint")
@endpoint_of
def webhook_remove(args, config):
    org = organization(args.org)
    endpoint = webhook_endpoints.remove_endpoint(org.id, args.env, actor=audit.CLI_ACTOR)
    emit(args, {"url": endpoint.url, "removed": True}, f"removed {endpoint.url}")


@hooks.command("show", "show the endpoint and its status")
@endpoint_of
def webhook_show(args, config):
    endpoint = webhook_endpoints.endpoint_for(organization(args.org).id, args.env)
    if endpoint is None:
        raise CommandError(f"no webhook endpoint is set for {args.org} ({args.env})")
    emit(args, endpoint.to_dict())


@hooks.command("deliveries", "recent events with their delivery attempts")
@argument("--org")
@argument("--env", choices=ENVIRONMENTS)
@argument("--limit", type=int, default=20)
def webhook_deliveries(args, config):
    if not 1 <= args.limit <= MAX_DELIVERIES_LISTED:
        raise CommandError(f"--limit must be at least 1 and at most {MAX_DELIVERIES_LISTED}")
    org_id = organization(args.org).id if args.org else None
    rows = webhook_events.recent_deliveries(org_id, args.env, args.limit)
    down = webhook_endpoints.down_endpoints(org_id, args.env)
    lines = [f"endpoint {row['organization']}/{row['environment']} {row['url']} is down since {row['down_since']}: "
             f"next probe at {row['next_probe_at']}; its other due deliveries wait, no attempt used" for row in down]
    for row in rows:
        lines.append(f"{row['created_at']}  {row['event_id']}  {row['type']}  {row['organization']}/"
                     f"{row['environment']}  {row['delivery_status']}  attempts={row['attempt_count']}")
        for attempt in row["attempts"]:
            lines.append(f"    #{attempt['number']} {attempt['attempted_at']}  "
                         f"{attempt['status_code'] or '-'}  {attempt['latency_ms']} ms  {attempt['error'] or ''}")
    emit(args, {"deliveries": rows, "endpoints_down": down}, "\n".join(lines) or "no webhook events")


@hooks.command("redeliver", "queue an event (or, with --since, many) for delivery now")
@argument("event_id", nargs="?")
@argument("--since", help="every event created at or after this ISO 8601 date or time (UTC)")
@argument("--status", default="failed,skipped",
          help="with --since: comma-separated statuses to requeue (default failed,skipped)")
@argument("--org", help="with --since: only this organization")
@argument("--env", choices=ENVIRONMENTS, help="with --since: only this environment")
def webhook_redeliver(args, config):
    if (args.event_id is None) == (args.since is None):
        raise CommandError("give an event id, or --since DATE for every event since then")
    if args.event_id is not None:
        event = webhook_events.redeliver(args.event_id, actor=audit.CLI_ACTOR)
        emit(args, event.to_dict(), f"queued {event.id} for delivery now")
        return
    since = parse_timestamp(args.since)
    statuses = tuple(status.strip() for status in args.status.split(",") if status.strip())
    org_id = organization(args.org).id if args.org else None
    queued = webhook_events.redeliver_since(since, statuses, org_id, args.env, actor=audit.CLI_ACTOR)
    emit(args, {"queued": queued, "since": models.isoformat(since), "statuses": list(statuses)},
         f"queued {queued} events created since {models.isoformat(since)} ({', '.join(statuses)}) for delivery now")


@command("prune", "delete finished webhook events and their attempts older than DAYS (never calculations)")
@argument("--older-than", type=whole_number(1, MAX_RETENTION_DAYS), required=True, metavar="DAYS")
def prune(args, config):
    deleted = webhook_events.prune(dt.timedelta(days=args.older_than), actor=audit.CLI_ACTOR)
    emit(args, {**deleted, "older_than_days": args.older_than},
         f"deleted {deleted['events']} finished webhook events and {deleted['attempts']} attempts "
         f"older than {args.older_than} days")
