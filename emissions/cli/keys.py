"""`emissions key ...`: an organization's API keys."""
from __future__ import annotations

from .. import audit
from .. import auth
from .. import clock
from .. import keys
from ..models import SCOPES
from .commands import ENVIRONMENTS, CommandError, argument, group
from .render import emit, table
from .values import organization, parse_timestamp

api_keys = group("key", "API keys")


@api_keys.command("create", "create an API key (shown once)")
@argument("--org", required=True)
@argument("--env", required=True, choices=ENVIRONMENTS)
@argument("--scopes", required=True, help="comma-separated: " + ",".join(SCOPES) + "; or all")
@argument("--expires-at")
@argument("--name")
def key_create(args, config):
    org = organization(args.org)
    key, plain = keys.create(org, args.env, keys.parse_scopes(args.scopes),
                             secret=auth.instance_secret(config.secret_key), name=args.name or "",
                             expires_at=parse_timestamp(args.expires_at), actor=audit.CLI_ACTOR)
    emit(args, {"id": key.id, "key": plain, "environment": key.environment, "scopes": sorted(key.scope_set)},
         f"{plain}\n(key id {key.id}; shown once: store it in a secret manager)")


@api_keys.command("revoke", "revoke an API key")
@argument("key_id")
def key_revoke(args, config):
    key = keys.find(args.key_id)
    if key is None:
        raise CommandError(f"no API key with id {args.key_id}")
    keys.revoke(key, actor=audit.CLI_ACTOR)
    emit(args, {"id": key.id, "revoked": True}, f"revoked {key.id}")


@api_keys.command("list", "list an organization's keys")
@argument("--org", required=True)
def key_list(args, config):
    org = organization(args.org)
    now = clock.now()
    listed = [{**key.to_dict(), "status": keys.status(key, now)} for key in keys.of_organization(org)]
    emit(args, {"keys": listed}, table(
        listed, lambda k: f"{k['id']}\t{k['environment']}\t{k['prefix']}…\t{k['name'] or '-'}\t"
                          f"{','.join(k['scopes'])}\t{k['status']}\texpires {k['expires_at'] or 'never'}",
        "no keys"))
