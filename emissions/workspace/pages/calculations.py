"""The calculations: the filtered list, its CSV download, and one calculation with its webhook events."""
from __future__ import annotations

import itertools
import re
from urllib.parse import urlencode

import bottle

from ... import jsoncodec
from ... import clock
from ...models import MODES
from .. import insights
from ...accounts import Session
from ..rendering import pretty_json, query_parameter, render, request_id
from ..session import Pages, signed_in


class CalculationPages(Pages):
    """/workspace/calculations, /workspace/calculations.csv and /workspace/calculations/<id>."""

    def _filters(self) -> tuple[insights.Filters, list[str]]:
        problems = []
        filters = insights.Filters(customer=query_parameter("customer").strip(), mode=query_parameter("mode"))
        if filters.mode and filters.mode not in MODES:
            problems.append("Mode must be ROAD, SEA or AIR.")
            filters.mode = ""
        for name, attribute in (("from", "date_from"), ("to", "date_to"), ("activity_from", "activity_from"),
                                ("activity_to", "activity_to")):
            text = query_parameter(name)
            if text:
                value = insights.parse_date(text)
                if value is None:
                    problems.append(f"The “{name.replace('_', ' ')}” date must be written YYYY-MM-DD.")
                setattr(filters, attribute, value)
        for start, end, name in ((filters.date_from, filters.date_to, "created"),
                                 (filters.activity_from, filters.activity_to, "activity")):
            if start and end and start > end:
                problems.append(f"The {name} “from” date is after the “to” date: no calculation can match."
                                if name == "activity" else
                                "The “from” date is after the “to” date: no calculation can match.")
        return filters, problems

    @signed_in
    def calculations_page(self, session: Session):
        filters, problems = self._filters()
        cursor = insights.parse_cursor(query_parameter("after")) if query_parameter("after") else None
        rows, next_cursor = insights.page(session.organization.id, session.environment, filters, cursor)
        query = filters.query_string()
        return render("calculations", 400 if problems else 200, title="Calculations", rows=rows, filters=filters,
                      problems=problems, modes=MODES, paged=cursor is not None,
                      next_url=("/workspace/calculations?" + urlencode({**query, "after": next_cursor}))
                      if next_cursor else "",
                      csv_url="/workspace/calculations.csv" + ("?" + urlencode(query) if query else ""),
                      **self.chrome(session, "calculations"))

    @signed_in
    def calculations_csv(self, session: Session):
        filters, problems = self._filters()
        if problems:
            return render("error", 400, title="Not downloaded", message=" ".join(problems),
                          request_id=request_id(), **self.chrome(session, "calculations"))
        bottle.response.set_header("Content-Type", "text/csv; charset=utf-8")
        bottle.response.set_header("Content-Disposition",
                                   f'attachment; filename="calculations-{session.environment}-'
                                   f'{clock.today().isoformat()}.csv"')
        lines = insights.csv_lines(session.organization.id, session.environment, filters)
        # The header and the first batch are read here, so that a failing query is still an error
        # page; a failure later can only cut the download short (the client sees it incomplete).
        first = [next(lines), next(lines, "")]
        return (line.encode() for line in itertools.chain(first, lines))

    @signed_in
    def calculation_page(self, session: Session, calculation_id: str):
        found = None
        if re.fullmatch(r"[0-9a-f-]{36}", calculation_id):
            found = insights.calculation(session.organization.id, session.environment, calculation_id)
        if found is None:
            return self.no_such(session, "calculations", "No such calculation",
                                "No calculation with this id exists in this environment.")
        row, body = found
        events = insights.events_of(session.organization.id, session.environment, row)
        return render("calculation", title="Calculation", calculation=body,
                      pretty=pretty_json(jsoncodec.loads(row.body)), events=events,
                      attempts=insights.attempts_of(events), **self.chrome(session, "calculations"))
