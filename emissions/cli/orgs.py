"""`emissions org ...` and `emissions usage`: organizations and their monthly capacity."""
from __future__ import annotations

import re

from .. import audit
from .. import limits
from .. import organizations
from .commands import CommandError, argument, command, group
from .render import emit, prose, table
from .values import capacity, organization

orgs = group("org", "organizations")

ORG_CREATE_FIELDS = ("slug", "name", "status", "entitled")


@orgs.command("create", "create an organization")
@argument("--name", required=True)
@argument("--slug")
@argument("--not-entitled", action="store_true")
@argument("--live-capacity", help="a whole number; unlimited when left out")
def org_create(args, config):
    live_capacity = None if args.live_capacity is None else capacity(args.live_capacity)
    org = organizations.create(args.name, slug=args.slug, entitled=not args.not_entitled,
                               live_capacity=live_capacity, actor=audit.CLI_ACTOR)
    # Exactly the decided shape; `org update` and `usage` show the capacities.
    emit(args, {name: value for name, value in org.to_dict().items() if name in ORG_CREATE_FIELDS})


@orgs.command("update", "change an organization")
@argument("slug")
@argument("--status", choices=["active", "suspended"])
# both at once is a usage error, not "the last wins"
@argument("--entitled", dest="entitled", action="store_true", default=None, exclusive="entitlement")
@argument("--not-entitled", dest="entitled", action="store_false", exclusive="entitlement")
@argument("--live-capacity", help="a whole number, or none for unlimited")
@argument("--test-capacity", help="a whole number, or none for the sandbox default")
def org_update(args, config):
    org = organization(args.slug)
    capacities = {name: capacity(value) for name, value in (("live_capacity", args.live_capacity),
                                                             ("test_capacity", args.test_capacity))
                  if value is not None}
    organizations.update(org, status=args.status, entitled=args.entitled, **capacities, actor=audit.CLI_ACTOR)
    emit(args, org.to_dict())


@orgs.command("list", "list organizations")
def org_list(args, config):
    orgs = [org.to_dict() for org in organizations.listed()]
    emit(args, {"organizations": orgs}, table(
        orgs, lambda o: f"{o['slug']}\t{o['status']}\tentitled: {prose(o['entitled'])}\t{o['name']}",
        "no organizations"))


@command("usage", "billable calculations and capacity of a month")
@argument("--org", required=True)
@argument("--period", help="YYYY-MM (UTC); the current month when left out")
def usage(args, config):
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
