"""The operator CLI `emissions`: a stable interface for scripts (every command takes --json)."""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import getpass
import io
import json
import os
import re
import secrets
import shlex
import signal
import sys

import peewee as pw
from playhouse import db_url

import emissions

from . import accounts
from .rollups import recount as analytics  # verify and rebuild of the rollup tables
from . import audit
from . import auth
from . import backup
from . import clock
from . import customers
from .exports import csv as export_csv, html as export_html, json as export_json
from . import factor_files
from . import factors
from . import jsoncodec
from . import keys
from . import limits
from . import logs
from . import migrations
from . import models
from . import organizations
from . import statements
from .webhooks import delivery as webhook_delivery
from .webhooks import endpoints as webhook_endpoints
from .webhooks import events as webhook_events
from .webhooks import signing as webhook_signing
from . import workspace
from .config import MAX_RETENTION_DAYS, MAX_WORKERS, Config, ConfigError
from .csvimport import ImportRejected
from .db import bind
from .models import Customer, Organization, SCOPES


class CommandError(Exception):
    """A command that cannot be carried out; its message is the one line printed on stderr."""


# The domain's own refusals: their messages are written for people, so they are printed as they are.
DOMAIN_ERRORS = (organizations.OrganizationError, keys.ApiKeyError, factors.FactorError,
                 webhook_endpoints.WebhookError, customers.CustomerError, workspace.WorkspaceError,
                 backup.BackupError)


def prose(value) -> str:
    """A value as a person reads it: yes/no, - for nothing, lists joined by commas."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(prose(item) for item in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{key} {prose(item)}" for key, item in value.items()) or "-"
    return str(value) or "-"


def emit(args, data: dict, text: str | None = None) -> None:
    """One JSON object with --json, else a readable line or block."""
    if args.json:
        print(json.dumps(data, default=str))
    else:
        print(text if text is not None else "\n".join(f"{key}: {prose(value)}" for key, value in data.items()))


def parse_date(raw: str | None) -> dt.date | None:
    if raw is None:
        return None
    try:
        return dt.date.fromisoformat(raw)
    except ValueError:
        raise CommandError(f"not a date (YYYY-MM-DD): {raw}") from None


def parse_timestamp(raw: str | None) -> dt.datetime | None:
    if raw is None:
        return None
    try:
        value = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"not an ISO 8601 timestamp: {raw}") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def capacity(raw: str) -> int | None:
    """A monthly capacity: a whole number, or 'none'."""
    if raw.lower() == "none":
        return None
    most = organizations.MAX_CAPACITY
    if not re.fullmatch(r"[0-9]{1,10}", raw) or int(raw) > most:
        raise CommandError(f"capacity must be a whole number from 0 to {most} or 'none', got {raw!r}")
    return int(raw)


def organization(slug: str) -> Organization:
    org = organizations.find(slug)
    if org is None:
        raise CommandError(f"no organization with slug {slug}")
    return org


def customer_dict(customer: Customer) -> dict:
    return {**customer.to_dict(), "environment": customer.environment,
            "organization": customer.organization.slug}


# --- commands ------------------------------------------------------------------------------------

def cmd_migrate(args, config):
    # The text names the database: a relative SQLite path depends on the working directory.
    emit(args, {"applied": args.applied}, f"database: {migrations.database_name(config.database_url)}\n"
         "applied: " + (", ".join(args.applied) or "nothing, up to date"))


ORG_CREATE_FIELDS = ("slug", "name", "status", "entitled")


def cmd_org_create(args, config):
    live_capacity = None if args.live_capacity is None else capacity(args.live_capacity)
    org = organizations.create(args.name, slug=args.slug, entitled=not args.not_entitled,
                               live_capacity=live_capacity, actor=audit.CLI_ACTOR)
    # Exactly the decided shape; `org update` and `usage` show the capacities.
    emit(args, {name: value for name, value in org.to_dict().items() if name in ORG_CREATE_FIELDS})


def cmd_org_update(args, config):
    org = organization(args.slug)
    capacities = {name: capacity(value) for name, value in (("live_capacity", args.live_capacity),
                                                             ("test_capacity", args.test_capacity))
                  if value is not None}
    organizations.update(org, status=args.status, entitled=args.entitled, **capacities, actor=audit.CLI_ACTOR)
    emit(args, org.to_dict())


def cmd_org_list(args, config):
    orgs = [org.to_dict() for org in organizations.listed()]
    emit(args, {"organizations": orgs}, "\n".join(
        f"{o['slug']}\t{o['status']}\tentitled: {prose(o['entitled'])}\t{o['name']}" for o in orgs) or "no organizations")


def cmd_key_create(args, config):
    org = organization(args.org)
    key, plain = keys.create(org, args.env, keys.parse_scopes(args.scopes),
                             secret=auth.instance_secret(config.secret_key), name=args.name or "",
                             expires_at=parse_timestamp(args.expires_at), actor=audit.CLI_ACTOR)
    emit(args, {"id": key.id, "key": plain, "environment": key.environment, "scopes": sorted(key.scope_set)},
         f"{plain}\n(key id {key.id}; shown once: store it in a secret manager)")


def cmd_key_revoke(args, config):
    key = keys.find(args.key_id)
    if key is None:
        raise CommandError(f"no API key with id {args.key_id}")
    keys.revoke(key, actor=audit.CLI_ACTOR)
    emit(args, {"id": key.id, "revoked": True}, f"revoked {key.id}")


def cmd_key_list(args, config):
    org = organization(args.org)
    now = clock.now()
    listed = [{**key.to_dict(), "status": keys.status(key, now)} for key in keys.of_organization(org)]
    emit(args, {"keys": listed}, "\n".join(
        f"{k['id']}\t{k['environment']}\t{k['prefix']}…\t{k['name'] or '-'}\t{','.join(k['scopes'])}\t"
        f"{k['status']}\texpires {k['expires_at'] or 'never'}" for k in listed) or "no keys")


def cmd_customer_create(args, config):
    org = organization(args.org)
    customer = customers.create(org, args.env, args.reference, args.name, args.country, args.status,
                                actor=audit.CLI_ACTOR)
    emit(args, customer_dict(customer))


def cmd_customer_update(args, config):
    org = organization(args.org)
    customer = customers.find(org.id, args.env, args.reference)
    if customer is None:
        raise CommandError(f"no customer {args.reference} in {args.org} ({args.env})")
    if args.name is None and args.country is None and args.status is None:
        raise CommandError("nothing to change: give --name, --country or --status")
    if args.country == "":  # to customers.update "" clears; here only "none" does
        raise CommandError("country must be a two-letter country code")
    clear_country = args.country is not None and args.country.lower() == "none"
    customers.update(customer, name=args.name, country="" if clear_country else args.country, status=args.status,
                     actor=audit.CLI_ACTOR)
    emit(args, customer_dict(customer))


def cmd_customer_list(args, config):
    org = organization(args.org)
    query = Customer.select().where(Customer.organization == org)
    if args.env:
        query = query.where(Customer.environment == args.env)
    if args.status:
        query = query.where(Customer.status == args.status)
    rows = [{**customer.to_dict(), "environment": customer.environment, "organization": org.slug}
            for customer in query.order_by(Customer.environment, Customer.reference)]
    emit(args, {"customers": rows}, "\n".join(
        f"{c['environment']}\t{c['reference']}\t{c['status']}\t{c['country_code'] or '-'}\t{c['name']}"
        for c in rows) or "no customers")


def import_file(args, racing: str, load):
    """Run an all-or-nothing CSV import of args.file; a bad file is one CommandError, each bad row a line."""
    try:
        with open(args.file, newline="", encoding="utf-8-sig") as stream:
            return load(stream)
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CommandError(f"{args.file} is not UTF-8 text; nothing imported") from None
    except pw.IntegrityError:
        raise CommandError(f"{args.file}: {racing} was created meanwhile; nothing imported") from None
    except ImportRejected as rejected:
        emit(args, {"imported": 0, "errors": [problem.to_dict() for problem in rejected.problems]},
             "\n".join(f"line {p.line}: {p.field} {p.reason}" for p in rejected.problems))
        raise CommandError(f"{args.file}: {rejected}") from None


def cmd_customer_import(args, config):
    org = organization(args.org)
    imported = import_file(args, "a customer with one of its references",
                           lambda stream: customers.import_customers(org, args.env, stream, name=args.file,
                                                                      actor=audit.CLI_ACTOR))
    emit(args, {"imported": imported, "organization": org.slug, "environment": args.env},
         f"imported {imported} customers into {org.slug} ({args.env})")


class ProgressBar:
    """A plain-text bar redrawn in place on stderr: [######......]  50.0%  5,000/10,000 calculations."""

    def __init__(self, total: int, label: str, stream=None, width: int = 30):
        self.total, self.label, self.width = total, label, width
        self.stream = stream or sys.stderr
        self.done = 0
        self.shown = -1

    def advance(self, count: int) -> None:
        self.done += count
        permille = min(self.done, self.total) * 1000 // self.total if self.total else 1000
        if permille != self.shown:  # at most a thousand redraws, however large the data
            self.shown = permille
            self.draw()

    def draw(self) -> None:
        done = min(self.done, self.total)
        filled = self.width * done // self.total if self.total else self.width
        percent = 100 * done / self.total if self.total else 100.0
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {percent:5.1f}%  "
                          f"{self.done:,}/{self.total:,} {self.label}")
        self.stream.flush()

    def finish(self) -> None:
        self.draw()
        self.stream.write("\n")
        self.stream.flush()


DRIFT_EXIT_STATUS = 3  # verify found drift: distinct from 1 (error) and 2 (usage)


def run_check(args, check):
    """Run analytics.verify or .rebuild over --org/--env, with a progress bar when asked or on a tty."""
    organization_id = organization(args.org).id if args.org else None
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    bar = ProgressBar(analytics.count_calculations(organization_id, args.env), "calculations") if show else None
    outcome = check(organization_id, args.env, progress=bar.advance if bar else None)
    if bar:
        bar.finish()
    return outcome


def drift_lines(drifts: list[dict]) -> list[str]:
    def totals(row):
        if row is None:
            return "no row"
        # A period rollup row (span day or month) has no first and last date of its own.
        dates = f", {row['first_activity_date']}..{row['last_activity_date']}" if "first_activity_date" in row else ""
        return (f"{row['calculation_count']} calculations, {row['activity_tkm']} tkm, {row['emissions_kg']} kgCO2e "
                f"(ttw {row['emissions_ttw_kg']}, wtt {row['emissions_wtt_kg']}){dates}")

    def rollup(r):
        return f"{r['mode']}/{r['business_context']}" + (f" {r['span']} {r['activity_date']}" if "span" in r else "")
    def owner(d):  # a customer, or (customer null) the organization's own day rows
        return f"{d['organization']}/{d['environment']}/" + (d["customer"] if d["customer"] is not None
                                                              else "(organization)")
    return [f"{owner(d)} {rollup(r)}: "
            f"expected {totals(r['expected'])}; stored {totals(r['stored'])}" for d in drifts for r in d["rows"]]


def emit_check(args, outcome, listed_as: str) -> list[dict]:
    """Print a verify or rebuild outcome: its drifted customers listed under `listed_as`, the
    organizations whose own day rows drifted under `organizations_<listed_as>`; both returned."""
    listed = [drift.to_dict() for drift in outcome.drifted]
    customers = [drift for drift in listed if drift["customer"] is not None]
    organizations = [drift for drift in listed if drift["customer"] is None]
    summary = (f"checked {outcome.customers:,} customers, {outcome.calculations:,} calculations: "
               f"{len(customers)} {listed_as}" + (f", {len(organizations)} organization(s) {listed_as}"
                                                  if organizations else ""))
    emit(args, {"customers": outcome.customers, "calculations": outcome.calculations, listed_as: customers,
                f"organizations_{listed_as}": organizations},
         "\n".join(drift_lines(listed) + [summary]))
    return listed


def cmd_analytics_verify(args, config):
    drifted = emit_check(args, run_check(args, analytics.verify), "drifted")
    if drifted:
        customers = sum(1 for drift in drifted if drift["customer"] is not None)
        counts = [f"{count} {what}(s)" for count, what in ((customers, "customer"),
                                                          (len(drifted) - customers, "organization")) if count]
        print(f"emissions: analytics drift in {' and '.join(counts)}; "
              "`emissions analytics rebuild` repairs it", file=sys.stderr)
        return DRIFT_EXIT_STATUS
    return 0


def cmd_analytics_rebuild(args, config):
    emit_check(args, run_check(args, analytics.rebuild), "repaired")


def read_password(args, confirm: bool = True) -> str:
    """The password from --password (warned about), --password-stdin, or a prompt; never echoed."""
    if getattr(args, "password", None) is not None:
        print("emissions: warning: --password lands in shell history and the process list; "
              "prefer the prompt or --password-stdin", file=sys.stderr)
        return args.password
    if args.password_stdin or not sys.stdin.isatty():
        line = sys.stdin.readline()
        if not line:
            raise CommandError("no password on standard input")
        return line.rstrip("\r\n")
    try:
        password = getpass.getpass("Password: ")
        if confirm and getpass.getpass("Password again: ") != password:
            raise CommandError("the two passwords differ")
    except (EOFError, KeyboardInterrupt):
        raise CommandError("no password given") from None
    return password


def user(email: str) -> models.User:
    found = accounts.find_user(email)
    if found is None:
        raise CommandError(f"no user with email {email.strip().lower()}")
    return found


def cmd_user_create(args, config):
    org = organization(args.org)
    password = read_password(args)
    created = workspace.create_user(org, args.email, password, actor=audit.CLI_ACTOR)
    emit(args, {"email": created.email, "organization": org.slug})


def cmd_user_list(args, config):
    listed = [{"email": u.email, "organization": u.organization.slug, "created_at": models.isoformat(u.created_at),
               "last_sign_in_at": models.isoformat(u.last_sign_in_at)}
              for u in accounts.users(organization(args.org) if args.org else None)]
    emit(args, {"users": listed}, "\n".join(
        f"{u['email']}\t{u['organization']}\tcreated {u['created_at']}\tlast sign-in {u['last_sign_in_at'] or '-'}"
        for u in listed) or "no users")


def cmd_user_delete(args, config):
    found = user(args.email)
    workspace.delete_user(found, actor=audit.CLI_ACTOR)
    emit(args, {"email": found.email, "deleted": True}, f"deleted {found.email}; its sessions ended")


def cmd_user_set_password(args, config):
    found = user(args.email)
    password = read_password(args)
    workspace.set_password(found, password, actor=audit.CLI_ACTOR)
    emit(args, {"email": found.email, "password_changed": True},
         f"password of {found.email} changed; its sessions ended")


def cmd_factor_create(args, config):
    if args.value is not None and (args.ttw is not None or args.wtt is not None):
        raise CommandError("give either --value or --ttw and --wtt, not both")
    if args.value is None and (args.ttw is None or args.wtt is None):
        raise CommandError("give --value, or --ttw and --wtt together")
    org = organization(args.org) if args.org else None
    factor = factors.create(args.reference, args.mode, args.value, args.name, args.source,
                            region=args.region, valid_from=parse_date(args.valid_from),
                            valid_to=parse_date(args.valid_to), organization=org, draft=args.draft,
                            ttw_value=args.ttw, wtt_value=args.wtt, radiative_forcing=args.radiative_forcing,
                            hub_type=args.hub_type, actor=audit.CLI_ACTOR)
    emit(args, {"reference": factor.reference, "version": factor.version, "status": factor.status})


def cmd_factor_activate(args, config):
    factor = factors.activate(args.reference, args.version, actor=audit.CLI_ACTOR)
    emit(args, factor.to_dict())


def cmd_factor_retire(args, config):
    factor = factors.retire(args.reference, actor=audit.CLI_ACTOR)
    emit(args, factor.to_dict())


def cmd_factor_list(args, config):
    rows = [factor.to_dict() for factor in models.Factor.select().order_by(models.Factor.reference,
                                                                           models.Factor.version)]
    emit(args, {"factors": rows}, "\n".join(
        f"{f['reference']}\tv{f['version']}\t{f['status']}\t{f['mode']}\t{f['value']}"
        f"\tttw {f['ttw'] or '-'}\twtt {f['wtt'] or '-'}" for f in rows) or "no factors")


def cmd_factor_load_library(args, config):
    outcome = factor_files.load_library(actor=audit.CLI_ACTOR)
    publication = factor_files.library()["publication"]
    data = {"library": factor_files.LIBRARY_PATH.name, **outcome.to_dict(),
            "publication": {key: publication[key] for key in ("title", "publisher", "year", "licence")}}
    skipped = [f"skipped {item['reference']}: {item['reason']}" for item in data["skipped"]]
    emit(args, data, "\n".join(skipped + [
        f"{publication['title']} ({publication['publisher']}, {publication['licence']}): "
        f"{len(outcome.created)} created, {len(outcome.updated)} updated, "
        f"{outcome.unchanged} unchanged, {len(skipped)} skipped"]))


def cmd_factor_import(args, config):
    org = organization(args.org) if args.org else None
    outcome = import_file(args, "a version of one of its references",
                          lambda stream: factor_files.import_factors(stream, org, draft=args.draft, name=args.file,
                                                                     actor=audit.CLI_ACTOR))
    owner = org.slug if org else "the global library"
    emit(args, {**outcome.to_dict(), "organization": org.slug if org else None, "draft": args.draft},
         f"imported {outcome.to_dict()['imported']} factor versions into {owner}"
         f"{' as drafts' if args.draft else ''} ({outcome.created} new references, "
         f"{outcome.unchanged} rows unchanged)")


def cmd_factor_export(args, config):
    org = organization(args.org) if args.org else None
    buffer = io.StringIO()
    count = factor_files.export_factors(buffer, org)
    if args.output:
        try:
            with open(args.output, "w", newline="", encoding="utf-8") as stream:
                stream.write(buffer.getvalue())
        except OSError as exc:
            raise CommandError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        emit(args, {"exported": count, "organization": org.slug if org else None, "file": args.output},
             f"exported {count} factors to {args.output}")
    elif args.json:
        emit(args, {"exported": count, "organization": org.slug if org else None, "csv": buffer.getvalue()})
    else:
        sys.stdout.write(buffer.getvalue())


def cmd_usage(args, config):
    org = organization(args.org)
    if args.period is None:
        period = limits.current_period()
    elif re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", args.period):
        period = args.period
    else:
        raise CommandError(f"period must be YYYY-MM, got {args.period!r}")
    used = limits.usage(org, period)
    environments = {environment: {"used": used[environment],
                                  "capacity": limits.capacity_for(org, environment, config.test_capacity)}
                    for environment in ("test", "live")}
    emit(args, {"organization": org.slug, "period": period, "environments": environments},
         "\n".join([f"{org.slug}, {period}"] + [
             f"{environment}: {numbers['used']} of "
             f"{'unlimited' if numbers['capacity'] is None else numbers['capacity']}"
             for environment, numbers in environments.items()]))


def cmd_statement(args, config):
    """A customer's emissions statement for a period (statements.py): JSON, the period's calculations as
    CSV, or a printable HTML page; to --output or stdout."""
    org = organization(args.org)
    start, end = parse_date(getattr(args, "from")), parse_date(args.to)
    if start and end and start > end:
        raise CommandError(f"--from {start} is after --to {end}")
    found = statements.statement(org.id, args.env, args.customer, start, end)
    if found is None:
        raise CommandError(f"no customer {args.customer} in {org.slug} ({args.env})")
    if args.format == "csv":
        content = "".join(export_csv.calculations(statements.calculation_rows(org.id, args.env, args.customer,
                                                                              start, end)))
    elif args.format == "html":
        content = export_html.statement(found)
    else:
        content = export_json.statement(found)
    if args.output is None:
        if args.json and args.format != "json":
            raise CommandError("--json prints the statement as JSON: use --format json, or --output FILE")
        sys.stdout.write(content)
        return 0
    with open(args.output, "w", encoding="utf-8", newline="") as out:
        out.write(content)
    emit(args, {"output": args.output, "format": args.format, "customer": args.customer, "period": found["period"],
                "calculation_count": int(found["totals"]["calculation_count"]),
                "shipment_count": found["totals"]["shipment_count"],
                "single_calculation_count": found["totals"]["single_calculation_count"]},
         f"wrote the {args.format} statement of {args.customer} to {args.output}")
    return 0


def cmd_webhook_set(args, config):
    org = organization(args.org)
    previous = webhook_endpoints.endpoint_for(org.id, args.env)
    endpoint, secret = webhook_endpoints.set_endpoint(org.id, args.env, args.url, actor=audit.CLI_ACTOR,
                                                      allow_private_live=config.webhook_allow_private_live,
                                                      allow_private_test=config.webhook_allow_private_test,
                                                      signature=args.signature)
    if previous is not None and previous.status == "disabled":
        skipped = webhook_events.skipped_since(org.id, args.env, previous.updated_at)
        if skipped:
            print(f"emissions: {skipped} events were skipped while the endpoint was disabled; "
                  f"`emissions webhook redeliver --since {models.isoformat(previous.updated_at)} --status skipped "
                  f"--org {org.slug} --env {args.env}` sends them", file=sys.stderr)
    emit(args, {"url": endpoint.url, "secret": secret, "signature": endpoint.signature},
         f"{endpoint.url}\nsecret: {secret}\nsignature: {endpoint.signature}\n"
         "(shown once: store it where the receiver reads it)")


def cmd_webhook_rotate(args, config):
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


def cmd_webhook_end_overlap(args, config):
    org = organization(args.org)
    endpoint = webhook_endpoints.end_overlap(org.id, args.env, actor=audit.CLI_ACTOR)
    emit(args, {"url": endpoint.url, "overlap_ended": True},
         f"{endpoint.url}: the new secret is now the only one")


def cmd_webhook_remove(args, config):
    org = organization(args.org)
    endpoint = webhook_endpoints.remove_endpoint(org.id, args.env, actor=audit.CLI_ACTOR)
    emit(args, {"url": endpoint.url, "removed": True}, f"removed {endpoint.url}")


def cmd_webhook_show(args, config):
    endpoint = webhook_endpoints.endpoint_for(organization(args.org).id, args.env)
    if endpoint is None:
        raise CommandError(f"no webhook endpoint is set for {args.org} ({args.env})")
    emit(args, endpoint.to_dict())


def cmd_webhook_deliveries(args, config):
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


def cmd_webhook_redeliver(args, config):
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


def cmd_prune(args, config):
    deleted = webhook_events.prune(dt.timedelta(days=args.older_than), actor=audit.CLI_ACTOR)
    emit(args, {**deleted, "older_than_days": args.older_than},
         f"deleted {deleted['events']} finished webhook events and {deleted['attempts']} attempts "
         f"older than {args.older_than} days")


def cmd_backup(args, config):
    copied = backup.backup(args.path)
    emit(args, copied, f"copied {copied['calculations']:,} calculations to {copied['path']} ({copied['bytes']:,} bytes)")


MAX_AUDIT_LISTED = 10_000


def cmd_audit(args, config):
    if not 1 <= args.limit <= MAX_AUDIT_LISTED:
        raise CommandError(f"--limit must be at least 1 and at most {MAX_AUDIT_LISTED}")
    org = organization(args.org) if args.org else None
    events = [event.to_dict() for event in audit.recent(org, args.limit)]
    emit(args, {"events": events}, "\n".join(
        f"{e['time']}  {e['actor']}  {e['action']}  {e['target']}  {e['organization'] or '-'}"
        f"{'/' + e['environment'] if e['environment'] else ''}" + (f"  ({prose(e['details'])})" if e["details"] else "")
        for e in events) or "no audit events")


def cmd_deliver(args, config):
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


def cmd_serve(args, config):
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
    from .serving import server  # Waitress and the app load only for the commands that serve
    from .serving import workers

    count = getattr(args, "workers", None) or config.workers
    try:
        if count > 1:
            # config.workers tells the app it is one of several processes (the workspace's sign-in uses it).
            workers.serve(config.with_(workers=count), args.host, args.port, count, **options)
        else:
            server.serve(config, host=args.host, port=args.port, **options)
    except server.ListenError as exc:
        raise CommandError(str(exc)) from None


SANDBOX_SLUG = "sandbox"
DEMO_CUSTOMER = "demo-customer"
QUICKSTART_FACTOR = "desnz-2025-road-hgv-diesel-average-laden"


def seed_sandbox(config: Config) -> str:
    """Create the sandbox organization, the factor library and a demo customer where missing; return a
    new test key. Each is in the audit trail, as when made by its own command."""
    factor_files.load_library(actor=audit.CLI_ACTOR)
    org = organizations.find(SANDBOX_SLUG)
    if org is None:
        org = organizations.create("Sandbox", slug=SANDBOX_SLUG, actor=audit.CLI_ACTOR)
    if customers.find(org.id, "test", DEMO_CUSTOMER) is None:
        customers.create(org, "test", DEMO_CUSTOMER, "Demo Customer Ltd", "GB", actor=audit.CLI_ACTOR)
    _, plain = keys.create(org, "test", list(SCOPES), secret=auth.instance_secret(config.secret_key),
                           name="quickstart", actor=audit.CLI_ACTOR)
    return plain


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
    return f"{invoked_as()} user create --org {SANDBOX_SLUG} --email you@example.com"


def quickstart_curl(key: str, host: str, port: int) -> str:
    """A curl command, ready to paste, that calculates a shipment for the demo customer."""
    body = json.dumps({
        "customer_reference": DEMO_CUSTOMER, "external_reference": "shipment-0001", "mode": "ROAD",
        "origin": {"code": "GBLON", "label": "London", "country": "GB"},
        "destination": {"code": "GBMNC", "label": "Manchester", "country": "GB"},
        "cargo": {"value": 12.5, "unit": "tonne"}, "distance": {"value": 320, "unit": "km"},
        "activity_date": clock.today().isoformat(),
        "factor_reference": QUICKSTART_FACTOR}, separators=(",", ":"))
    return (f"curl -sS -X POST {base_url(host, port)}/v1/emissions/logistics \\\n"
            f"  -H 'Authorization: Bearer {key}' \\\n"
            f"  -H 'Content-Type: application/json' \\\n"
            f"  -H 'Idempotency-Key: quickstart-{secrets.token_hex(6)}' \\\n"
            f"  -d '{body}'")


def cmd_quickstart(args, config):
    """Seed a sandbox (organization, factor library, demo customer, a test key) and serve."""
    plain = seed_sandbox(config)
    # A local sandbox posts its test webhooks to receivers on this machine: private addresses are allowed.
    config = config.with_(webhook_allow_private_test=True)
    if args.json:
        def announce(url: str) -> None:
            print(json.dumps({"organization": SANDBOX_SLUG, "environment": "test", "customer": DEMO_CUSTOMER,
                              "key": plain, "url": url, "curl": quickstart_curl(plain, args.host, args.port),
                              "workspace": f"{url}/workspace", "sign_in": sign_in_command(),
                              "private_test_endpoints": True}),
                  flush=True)

        serve(config, args, json_output=True, announce=announce)
        return
    print(f"""
Sandbox organization: {SANDBOX_SLUG} (test environment), demo customer: {DEMO_CUSTOMER}
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


# The commands that apply pending migrations (as documented); every other one refuses to run on them.
MIGRATING_COMMANDS = (cmd_migrate, cmd_serve, cmd_quickstart)


# --- the parser ------------------------------------------------------------------------------

def whole_number(minimum: int, maximum: int):
    """An argparse type: a whole number within [minimum, maximum], or a usage error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be from {minimum} to {maximum}")
        return value
    return parse


PORT = whole_number(0, 65535)
WORKERS = whole_number(1, MAX_WORKERS)
VERSION = whole_number(1, 2**31 - 1)  # factor.version is a 32-bit integer column
MAX_DELIVERIES_LISTED = 10_000


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other error (exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser = Parser(prog="emissions", description="Operate the emissions calculation service.",
                    epilog="Every command takes --json (one JSON object on stdout); see docs/cli.md.")
    parser.add_argument("--version", action="version", version=f"emissions {emissions.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def group(name, help_text):
        sub = commands.add_parser(name, help=help_text)
        return sub.add_subparsers(dest="action", required=True)

    def command(where, name, handler, help_text):
        sub = where.add_parser(name, parents=[common], help=help_text)
        sub.set_defaults(handler=handler)
        return sub

    command(commands, "migrate", cmd_migrate, "apply database migrations")
    for name, handler, help_text in (("serve", cmd_serve, "serve the API, workspace and webhook scheduler"),
                                     ("quickstart", cmd_quickstart, "seed a sandbox, print a test key, serve")):
        sub = command(commands, name, handler, help_text)
        sub.add_argument("--host", default="127.0.0.1")
        sub.add_argument("--port", type=PORT, default=8000)
        if name == "serve":
            sub.add_argument("--workers", type=WORKERS,
                             help="serving processes sharing the port (default: WORKERS, else 1)")

    orgs = group("org", "organizations")
    sub = command(orgs, "create", cmd_org_create, "create an organization")
    sub.add_argument("--name", required=True)
    sub.add_argument("--slug")
    sub.add_argument("--not-entitled", action="store_true")
    sub.add_argument("--live-capacity", help="a whole number; unlimited when left out")
    sub = command(orgs, "update", cmd_org_update, "change an organization")
    sub.add_argument("slug")
    sub.add_argument("--status", choices=["active", "suspended"])
    entitlement = sub.add_mutually_exclusive_group()  # both at once is a usage error, not "the last wins"
    entitlement.add_argument("--entitled", dest="entitled", action="store_true", default=None)
    entitlement.add_argument("--not-entitled", dest="entitled", action="store_false")
    sub.add_argument("--live-capacity", help="a whole number, or none for unlimited")
    sub.add_argument("--test-capacity", help="a whole number, or none for the sandbox default")
    command(orgs, "list", cmd_org_list, "list organizations")

    sub = command(commands, "usage", cmd_usage, "billable calculations and capacity of a month")
    sub.add_argument("--org", required=True)
    sub.add_argument("--period", help="YYYY-MM (UTC); the current month when left out")

    api_keys = group("key", "API keys")
    sub = command(api_keys, "create", cmd_key_create, "create an API key (shown once)")
    sub.add_argument("--org", required=True)
    sub.add_argument("--env", required=True, choices=["test", "live"])
    sub.add_argument("--scopes", required=True, help="comma-separated: " + ",".join(SCOPES) + "; or all")
    sub.add_argument("--expires-at")
    sub.add_argument("--name")
    sub = command(api_keys, "revoke", cmd_key_revoke, "revoke an API key")
    sub.add_argument("key_id")
    sub = command(api_keys, "list", cmd_key_list, "list an organization's keys")
    sub.add_argument("--org", required=True)

    custs = group("customer", "customers")
    sub = command(custs, "create", cmd_customer_create, "create a customer")
    sub.add_argument("--org", required=True)
    sub.add_argument("--env", required=True, choices=["test", "live"])
    sub.add_argument("--reference", required=True)
    sub.add_argument("--name", required=True)
    sub.add_argument("--country")
    sub.add_argument("--status", default="active", choices=list(customers.STATUSES))
    sub = command(custs, "update", cmd_customer_update, "change a customer's name, country or status")
    sub.add_argument("--org", required=True)
    sub.add_argument("--env", required=True, choices=["test", "live"])
    sub.add_argument("--reference", required=True)
    sub.add_argument("--name")
    sub.add_argument("--country", help="a two-letter code, or none to clear it")
    sub.add_argument("--status", choices=list(customers.STATUSES))
    sub = command(custs, "list", cmd_customer_list, "list an organization's customers")
    sub.add_argument("--org", required=True)
    sub.add_argument("--env", choices=["test", "live"])
    sub.add_argument("--status", choices=list(customers.STATUSES))
    sub = command(custs, "import", cmd_customer_import,
                  "import customers from a CSV file (header reference,name,country,status): all or none")
    sub.add_argument("file")
    sub.add_argument("--org", required=True)
    sub.add_argument("--env", required=True, choices=["test", "live"])

    sub = command(commands, "statement", cmd_statement,
                  "a customer's emissions statement for a period of activity dates (json, csv or html)")
    sub.add_argument("--org", required=True)
    sub.add_argument("--env", required=True, choices=["test", "live"])
    sub.add_argument("--customer", required=True, help="the customer's reference")
    sub.add_argument("--from", help="first activity date, YYYY-MM-DD (inclusive; open when left out)")
    sub.add_argument("--to", help="last activity date, YYYY-MM-DD (inclusive; open when left out)")
    sub.add_argument("--format", choices=["json", "csv", "html"], default="json",
                     help="json: the statement; csv: the period's calculations; html: a printable page")
    sub.add_argument("--output", help="write to this file (default: stdout)")

    analytics = group("analytics", "customer analytics rollups")
    for name, handler, help_text in (
            ("verify", cmd_analytics_verify, "recompute the rollups from the calculations and report drift "
                                             f"(exit status {DRIFT_EXIT_STATUS} when there is any)"),
            ("rebuild", cmd_analytics_rebuild, "recompute the rollups and repair the drifted ones")):
        sub = command(analytics, name, handler, help_text)
        sub.add_argument("--org", help="only this organization (default: all)")
        sub.add_argument("--env", choices=["test", "live"], help="only this environment (default: both)")
        sub.add_argument("--progress", dest="progress", action="store_true", default=None,
                         help="show a progress bar on stderr (default: when stderr is a terminal)")
        sub.add_argument("--no-progress", dest="progress", action="store_false")

    users = group("user", "workspace logins")
    sub = command(users, "create", cmd_user_create, "create a workspace login for an organization")
    sub.add_argument("--org", required=True)
    sub.add_argument("--email", required=True)
    password_options(sub)
    sub = command(users, "list", cmd_user_list, "list workspace logins")
    sub.add_argument("--org", help="only this organization's")
    sub = command(users, "delete", cmd_user_delete, "remove a workspace login (its sessions end at once)")
    sub.add_argument("email")
    sub = command(users, "set-password", cmd_user_set_password,
                  "set a login's password (its sessions end at once)")
    sub.add_argument("email")
    password_options(sub, allow_argument=False)

    facts = group("factor", "governed emission factors")
    sub = command(facts, "create", cmd_factor_create, "create a factor version")
    sub.add_argument("--reference", required=True)
    sub.add_argument("--mode", required=True, choices=[*models.MODES, models.HUB])
    sub.add_argument("--hub-type", choices=models.HUB_TYPES, help="HUB only (shipments): the hub type; "
                     "a HUB factor's figures are kgCO2e per tonne handled")
    sub.add_argument("--value", help="kgCO2e per tonne-km, well-to-wheel (or --ttw and --wtt)")
    sub.add_argument("--ttw", help="tank-to-wheel part, kgCO2e per tonne-km (with --wtt; the value is their sum)")
    sub.add_argument("--wtt", help="well-to-tank part, kgCO2e per tonne-km (with --ttw)")
    sub.add_argument("--radiative-forcing", dest="radiative_forcing", action="store_true", default=None,
                     help="AIR only: the factor includes the radiative forcing uplift")
    sub.add_argument("--no-radiative-forcing", dest="radiative_forcing", action="store_false",
                     help="AIR only: the factor leaves radiative forcing out")
    sub.add_argument("--name", required=True)
    sub.add_argument("--source", required=True)
    sub.add_argument("--region")
    sub.add_argument("--valid-from")
    sub.add_argument("--valid-to")
    sub.add_argument("--org", help="private to this organization; without it the factor is global")
    sub.add_argument("--draft", action="store_true", help="create without activating")
    sub = command(facts, "activate", cmd_factor_activate, "activate a version")
    sub.add_argument("reference")
    sub.add_argument("--version", type=VERSION, required=True)
    sub = command(facts, "retire", cmd_factor_retire, "retire the active version")
    sub.add_argument("reference")
    command(facts, "list", cmd_factor_list, "list factors")
    command(facts, "load-library", cmd_factor_load_library,
            "load the DESNZ 2025 freight library shipped with the package (again: only what changed)")
    sub = command(facts, "import", cmd_factor_import,
                  "import factor versions from a CSV file (docs/factors.md): all or none")
    sub.add_argument("file")
    sub.add_argument("--org", help="private to this organization; without it the factors are global")
    sub.add_argument("--draft", action="store_true", help="create the versions without activating them")
    sub = command(facts, "export", cmd_factor_export, "write the active factors as an import CSV")
    sub.add_argument("--org", help="this organization's own factors; without it the global ones")
    sub.add_argument("--output", help="write to this file instead of stdout")

    hooks = group("webhook", "the webhook endpoint and its deliveries")
    for name, handler, help_text in (
            ("set", cmd_webhook_set, "set the endpoint URL (a new secret, shown once)"),
            ("rotate", cmd_webhook_rotate, "give the endpoint a new secret (shown once), signed beside the "
                                           "current one for an overlap"),
            ("end-overlap", cmd_webhook_end_overlap, "end a rotation's overlap now: the new secret becomes the only one"),
            ("remove", cmd_webhook_remove, "remove the endpoint"),
            ("show", cmd_webhook_show, "show the endpoint and its status")):
        sub = command(hooks, name, handler, help_text)
        sub.add_argument("--org", required=True)
        sub.add_argument("--env", required=True, choices=["test", "live"])
        if name == "set":
            sub.add_argument("--url", required=True)
            sub.add_argument("--signature", choices=webhook_signing.SCHEMES,
                             help="service: the X-Service-Webhook-* headers (a new endpoint's default); standard: "
                                  "Standard Webhooks (webhook-id, -timestamp, -signature); unset: keep the endpoint's")
        if name == "rotate":
            sub.add_argument("--overlap", type=float, default=webhook_endpoints.DEFAULT_OVERLAP_HOURS, metavar="HOURS",
                             help="hours both secrets sign deliveries (default "
                                  f"{webhook_endpoints.DEFAULT_OVERLAP_HOURS}, at most "
                                  f"{webhook_endpoints.MAX_OVERLAP_HOURS}; 0: switch at once)")
    sub = command(hooks, "deliveries", cmd_webhook_deliveries, "recent events with their delivery attempts")
    sub.add_argument("--org")
    sub.add_argument("--env", choices=["test", "live"])
    sub.add_argument("--limit", type=int, default=20)
    sub = command(hooks, "redeliver", cmd_webhook_redeliver,
                  "queue an event (or, with --since, many) for delivery now")
    sub.add_argument("event_id", nargs="?")
    sub.add_argument("--since", help="every event created at or after this ISO 8601 date or time (UTC)")
    sub.add_argument("--status", default="failed,skipped",
                     help="with --since: comma-separated statuses to requeue (default failed,skipped)")
    sub.add_argument("--org", help="with --since: only this organization")
    sub.add_argument("--env", choices=["test", "live"], help="with --since: only this environment")
    sub = command(commands, "prune", cmd_prune,
                  "delete finished webhook events and their attempts older than DAYS (never calculations)")
    sub.add_argument("--older-than", type=whole_number(1, MAX_RETENTION_DAYS), required=True, metavar="DAYS")
    sub = command(commands, "backup", cmd_backup, "copy the live SQLite database consistently to PATH")
    sub.add_argument("path")
    sub = command(commands, "audit", cmd_audit, "administrative actions, newest first")
    sub.add_argument("--org", help="only this organization")
    sub.add_argument("--limit", type=int, default=50)
    sub = command(commands, "deliver", cmd_deliver, "deliver due webhooks until stopped (or --once)")
    sub.add_argument("--once", action="store_true", help="deliver what is due now, then exit")
    return parser


def password_options(sub, allow_argument: bool = True) -> None:
    """The password comes from a prompt, or --password-stdin (one line); never echoed."""
    sub.add_argument("--password-stdin", action="store_true",
                     help="read the password (at least 12 characters) from the first line of standard input")
    if allow_argument:
        sub.add_argument("--password", help="kept for scripts; lands in shell history: prefer --password-stdin")


def pending_message(count: int, database_url: str, new: bool = False) -> str:
    """The one line a command meets on a database with `count` pending migrations; it names the
    database, so that `emissions migrate` is run on that one and not on a new file elsewhere."""
    message = (f"the database {migrations.database_name(database_url)} has {count} pending "
               f"migration{'s' if count != 1 else ''}: run `emissions migrate` first")
    if new:
        message += " (the file does not exist yet: if your database is elsewhere, set DATABASE_URL to it)"
    return message


def refuse_if_pending(database, database_url: str) -> None:
    """A command other than migrate, serve and quickstart changes no schema: it stops at pending migrations."""
    waiting = migrations.pending(database)
    if waiting:
        raise CommandError(pending_message(len(waiting), database_url))


def is_new_sqlite_file(url: str) -> bool:
    """A SQLite DATABASE_URL naming a file that does not exist yet (opening it would create it)."""
    if not url.startswith("sqlite"):
        return False
    path = db_url.parse(url).get("database") or ""
    return path not in ("", ":memory:") and not path.startswith("file:") and not os.path.exists(path)


def _is_text(argument: str) -> bool:
    try:
        argument.encode("utf-8")  # bytes that were not UTF-8 arrive as lone surrogates
    except UnicodeEncodeError:
        return False
    return "\x00" not in argument


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `emissions` console command."""
    argv = sys.argv[1:] if argv is None else argv
    if not all(_is_text(argument) for argument in argv):
        print("emissions: arguments must be UTF-8 text", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # a usage error (already printed as one line), --help or --version
        return stop.code
    if args.command is None:  # `emissions` alone: what it can do, as --help says it
        parser.print_help()
        return 0
    try:
        config = Config.from_env()
        migrating = args.handler in MIGRATING_COMMANDS
        if args.handler is cmd_backup:  # before binding creates an empty database at a mistyped path
            backup.require_database(config.database_url)
        elif not migrating and is_new_sqlite_file(config.database_url):  # every migration is pending
            raise CommandError(pending_message(len(migrations.available()), config.database_url, new=True))
        try:
            # A connect timeout and keepalives, but no statement timeout: a command may run long (prune, migrate).
            database = bind(config.database_url, dataclasses.replace(config.postgres_waits, statement_timeout=0))
        except ValueError as exc:  # a DATABASE_URL of an unknown kind
            raise CommandError(str(exc)) from None
        if migrating:
            args.applied = migrations.run(database)
        else:
            refuse_if_pending(database, config.database_url)
        status = args.handler(args, config)
        sys.stdout.flush()  # here, not at exit: a reader that has gone is met below, not in a traceback
    except (CommandError, ConfigError, *DOMAIN_ERRORS) as exc:
        print(f"emissions: {exc}", file=sys.stderr)
        return 1
    except pw.DatabaseError as exc:
        print(f"emissions: database error: {(str(exc).splitlines() or [type(exc).__name__])[0]}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `emissions audit | head`: the reader went before the output was written
        # stdout points at /dev/null from here, so the interpreter's own flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("emissions: the output was closed before all of it was written", file=sys.stderr)
        return 1
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
