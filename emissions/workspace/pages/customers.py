"""The customers: the list by reference, adding one, and a customer's page with its analytics."""
from __future__ import annotations

import itertools
from urllib.parse import quote, urlencode

import bottle

from ... import customers
from ... import lanes
from ... import statements
from .. import chart
from .. import insights
from ...accounts import Session
from ..rendering import customer_path, pretty_json, query_parameter, redirect, render, request_id
from ..session import Pages, field, form_post, signed_in

CUSTOMERS_PAGE = 100
TOP_LANES = 5


class CustomerPages(Pages):
    """/workspace/customers and /workspace/customers/<reference>."""

    @signed_in
    def customers_page(self, session: Session, error: str = "", status: int = 200, form: dict | None = None):
        org, environment = session.organization, session.environment
        after = query_parameter("after")
        listed = insights.customers_after(org.id, environment, after, CUSTOMERS_PAGE + 1)
        next_url = ("/workspace/customers?" + urlencode({"after": listed[CUSTOMERS_PAGE - 1].reference})
                    if len(listed) > CUSTOMERS_PAGE else "")
        listed = listed[:CUSTOMERS_PAGE]
        totals = insights.customer_totals([customer.id for customer in listed])
        return render("customers", status, title="Customers", customers=listed, totals=totals, error=error,
                      form=form or {}, next_url=next_url, paged=bool(after), **self.chrome(session, "customers"))

    @form_post
    def add_customer(self, session: Session, form: dict):
        fields = {name: field(form, name).strip() for name in ("reference", "name", "country")}
        try:
            customer = customers.create(session.organization, session.environment, fields["reference"],
                                        fields["name"], fields["country"] or None, actor=session.actor)
        except customers.CustomerError as exc:
            return self.customers_page(error=f"Not added: {exc}.", status=400, form=fields)
        return redirect(customer_path(customer.reference))

    @signed_in
    def customer_page(self, session: Session, reference: str, error: str = "", status: int = 200,
                      form: dict | None = None):
        org, environment = session.organization, session.environment
        period, problems = insights.period_of(query_parameter("period"), query_parameter("from"), query_parameter("to"))
        found = None
        if customers.is_valid_reference(reference):
            found = insights.customer_period(org.id, environment, reference, period)
        if found is None:
            return render("error", 404, title="No such customer",
                          message="No customer with this reference exists in this environment.",
                          request_id=request_id(), **self.chrome(session, "customers"))
        view = query_parameter("format")
        if view == "csv" and not problems:
            bottle.response.set_header("Content-Type", "text/csv; charset=utf-8")
            bottle.response.set_header("Content-Disposition", 'attachment; filename="{}"'.format(
                insights.statement_file_name(reference, environment, period)))
            lines = insights.statement_csv_lines(org.id, environment, reference, period)
            # The header and the first row are read here, so that a failing query is still an error page.
            first = list(itertools.islice(lines, 2))
            return (line.encode() for line in itertools.chain(first, lines))
        if view == "statement" and not problems:
            return render("statement", title=f"Emissions statement: {found['name']}", organization=org,
                          statement=statements.statement(org.id, environment, reference, period.start, period.end),
                          period=period, back=customer_path(reference) + "?" + urlencode(period.query()))
        recent = insights.recent(org.id, environment, insights.Filters(customer=reference), 10)
        counts = statements.counts(customers.find(org.id, environment, reference).id,
                                   found["analytics"]["calculation_count"], period.start, period.end)
        months = insights.months_by_mode(org.id, environment, reference, found, period)
        base = customer_path(reference) + "?" + urlencode(period.query())
        found_lanes = lanes.lanes(org.id, environment, reference, period.start, period.end)
        return render("customer", 400 if problems else status, title=found["name"], customer=found,
                      analytics=found["analytics"], counts=counts, period=period, choices=insights.PERIOD_CHOICES,
                      problems=problems, chart=chart.monthly_stacked(months),
                      lanes=found_lanes["lanes"][:TOP_LANES], lane_count=found_lanes["lane_count"],
                      lanes_api_path=f"/v1/customers/{quote(reference, safe='')}/lanes"
                                     + ("?" + urlencode({k: v for k, v in found["analytics"]["period"].items() if v})
                                        if period.start or period.end else ""),
                      csv_url=base + "&format=csv", statement_url=base + "&format=statement",
                      api_path=f"/v1/customers/{quote(reference, safe='')}/emissions"
                               + ("?" + urlencode({k: v for k, v in found["analytics"]["period"].items() if v})
                                  if period.start or period.end else ""),
                      api_json=pretty_json(found), recent=recent, error=error, form=form or {},
                      **self.chrome(session, "customers"))

    @form_post
    def change_customer(self, session: Session, form: dict, reference: str):
        customer = None
        if customers.is_valid_reference(reference):
            customer = customers.find(session.organization.id, session.environment, reference)
        if customer is None:
            return self.no_such(session, "customers", "No such customer", "No customer with this reference.")
        action = field(form, "action")
        try:
            if action == "edit":
                customers.update(customer, name=field(form, "name"), country=field(form, "country").strip(),
                                 actor=session.actor)
            elif action in ("suspend", "reactivate"):
                customers.update(customer, status="suspended" if action == "suspend" else "active",
                                 actor=session.actor)
            else:
                raise customers.CustomerError("unknown action")
        except customers.CustomerError as exc:
            return self.customer_page(reference, error=f"Not saved: {exc}.", status=400,
                                      form={"name": field(form, "name"), "country": field(form, "country")})
        return redirect(customer_path(customer.reference))
