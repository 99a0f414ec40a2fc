"""`emissions factor ...`: the governed emission factors, one by one or as a library CSV."""
from __future__ import annotations

import io
import sys

from .. import audit
from .. import factor_files
from .. import factors
from .. import models
from .commands import CommandError, argument, group, whole_number
from .render import emit, table
from .values import import_file, organization, parse_date

VERSION = whole_number(1, 2**31 - 1)  # factor.version is a 32-bit integer column

facts = group("factor", "governed emission factors")


@facts.command("create", "create a factor version")
@argument("--reference", required=True)
@argument("--mode", required=True, choices=[*models.MODES, models.HUB])
@argument("--hub-type", choices=models.HUB_TYPES, help="HUB only (shipments): the hub type; "
          "a HUB factor's figures are kgCO2e per tonne handled")
@argument("--value", help="kgCO2e per tonne-km, well-to-wheel (or --ttw and --wtt)")
@argument("--ttw", help="tank-to-wheel part, kgCO2e per tonne-km (with --wtt; the value is their sum)")
@argument("--wtt", help="well-to-tank part, kgCO2e per tonne-km (with --ttw)")
@argument("--radiative-forcing", dest="radiative_forcing", action="store_true", default=None,
          help="AIR only: the factor includes the radiative forcing uplift")
@argument("--no-radiative-forcing", dest="radiative_forcing", action="store_false",
          help="AIR only: the factor leaves radiative forcing out")
@argument("--name", required=True)
@argument("--source", required=True)
@argument("--region")
@argument("--valid-from")
@argument("--valid-to")
@argument("--org", help="private to this organization; without it the factor is global")
@argument("--draft", action="store_true", help="create without activating")
def factor_create(args, config):
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


@facts.command("activate", "activate a version")
@argument("reference")
@argument("--version", type=VERSION, required=True)
def factor_activate(args, config):
    factor = factors.activate(args.reference, args.version, actor=audit.CLI_ACTOR)
    emit(args, factor.to_dict())


@facts.command("retire", "retire the active version")
@argument("reference")
def factor_retire(args, config):
    factor = factors.retire(args.reference, actor=audit.CLI_ACTOR)
    emit(args, factor.to_dict())


@facts.command("list", "list factors")
def factor_list(args, config):
    rows = [factor.to_dict() for factor in factors.versions()]
    emit(args, {"factors": rows}, table(
        rows, lambda f: f"{f['reference']}\tv{f['version']}\t{f['status']}\t{f['mode']}\t{f['value']}"
                        f"\tttw {f['ttw'] or '-'}\twtt {f['wtt'] or '-'}",
        "no factors"))


@facts.command("load-library",
               "load the DESNZ 2025 freight library shipped with the package (again: only what changed)")
def factor_load_library(args, config):
    outcome = factor_files.load_library(actor=audit.CLI_ACTOR)
    publication = factor_files.library()["publication"]
    data = {"library": factor_files.LIBRARY_PATH.name, **outcome.to_dict(),
            "publication": {key: publication[key] for key in ("title", "publisher", "year", "licence")}}
    skipped = [f"skipped {item['reference']}: {item['reason']}" for item in data["skipped"]]
    emit(args, data, "\n".join(skipped + [
        f"{publication['title']} ({publication['publisher']}, {publication['licence']}): "
        f"{len(outcome.created)} created, {len(outcome.updated)} updated, "
        f"{outcome.unchanged} unchanged, {len(skipped)} skipped"]))


@facts.command("import", "import factor versions from a CSV file (docs/factors.md): all or none")
@argument("file")
@argument("--org", help="private to this organization; without it the factors are global")
@argument("--draft", action="store_true", help="create the versions without activating them")
def factor_import(args, config):
    org = organization(args.org) if args.org else None
    outcome = import_file(args, "a version of one of its references",
                          lambda stream: factor_files.import_factors(stream, org, draft=args.draft, name=args.file,
                                                                     actor=audit.CLI_ACTOR))
    owner = org.slug if org else "the global library"
    emit(args, {**outcome.to_dict(), "organization": org.slug if org else None, "draft": args.draft},
         f"imported {outcome.to_dict()['imported']} factor versions into {owner}"
         f"{' as drafts' if args.draft else ''} ({outcome.created} new references, "
         f"{outcome.unchanged} rows unchanged)")


@facts.command("export", "write the active factors as an import CSV")
@argument("--org", help="this organization's own factors; without it the global ones")
@argument("--output", help="write to this file instead of stdout")
def factor_export(args, config):
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
