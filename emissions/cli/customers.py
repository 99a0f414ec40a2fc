"""`emissions customer ...` and `emissions statement`: an organization's customers and their statements."""
from __future__ import annotations

import sys

from .. import audit
from .. import customers
from .. import statements
from ..exports import csv as export_csv, html as export_html, json as export_json
from ..models import Customer
from .commands import ENVIRONMENTS, CommandError, argument, command, group
from .render import emit, table
from .values import import_file, organization, parse_date

custs = group("customer", "customers")


def customer_dict(customer: Customer) -> dict:
    return {**customer.to_dict(), "environment": customer.environment,
            "organization": customer.organization.slug}


@custs.command("create", "create a customer")
@argument("--org", required=True)
@argument("--env", required=True, choices=ENVIRONMENTS)
@argument("--reference", required=True)
@argument("--name", required=True)
@argument("--country")
@argument("--status", default="active", choices=list(customers.STATUSES))
def customer_create(args, config):
    org = organization(args.org)
    customer = customers.create(org, args.env, args.reference, args.name, args.country, args.status,
                                actor=audit.CLI_ACTOR)
    emit(args, customer_dict(customer))


@custs.command("update", "change a customer's name, country or status")
@argument("--org", required=True)
@argument("--env", required=True, choices=ENVIRONMENTS)
@argument("--reference", required=True)
@argument("--name")
@argument("--country", help="a two-letter code, or none to clear it")
@argument("--status", choices=list(customers.STATUSES))
def customer_update(args, config):
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


@custs.command("list", "list an organization's customers")
@argument("--org", required=True)
@argument("--env", choices=ENVIRONMENTS)
@argument("--status", choices=list(customers.STATUSES))
def customer_list(args, config):
    org = organization(args.org)
    rows = [{**customer.to_dict(), "environment": customer.environment, "organization": org.slug}
            for customer in customers.of_organization(org, args.env, args.status)]
    emit(args, {"customers": rows}, table(
        rows, lambda c: f"{c['environment']}\t{c['reference']}\t{c['status']}\t{c['country_code'] or '-'}\t{c['name']}",
        "no customers"))


@custs.command("import", "import customers from a CSV file (header reference,name,country,status): all or none")
@argument("file")
@argument("--org", required=True)
@argument("--env", required=True, choices=ENVIRONMENTS)
def customer_import(args, config):
    org = organization(args.org)
    imported = import_file(args, "a customer with one of its references",
                           lambda stream: customers.import_customers(org, args.env, stream, name=args.file,
                                                                      actor=audit.CLI_ACTOR))
    emit(args, {"imported": imported, "organization": org.slug, "environment": args.env},
         f"imported {imported} customers into {org.slug} ({args.env})")


@command("statement", "a customer's emissions statement for a period of activity dates (json, csv or html)")
@argument("--org", required=True)
@argument("--env", required=True, choices=ENVIRONMENTS)
@argument("--customer", required=True, help="the customer's reference")
@argument("--from", help="first activity date, YYYY-MM-DD (inclusive; open when left out)")
@argument("--to", help="last activity date, YYYY-MM-DD (inclusive; open when left out)")
@argument("--format", choices=["json", "csv", "html"], default="json",
          help="json: the statement; csv: the period's calculations; html: a printable page")
@argument("--output", help="write to this file (default: stdout)")
def statement(args, config):
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
