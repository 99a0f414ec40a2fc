"""The overview: this month's usage, the emissions of a period (the picker's), the last 30 days drawn, the latest
calculations."""
from __future__ import annotations

import datetime as dt

from ... import clock
from ...webhooks import endpoints as webhook_endpoints
from .. import chart
from .. import insights
from ...accounts import Session
from ..rendering import query_parameter, render
from ..session import Pages, signed_in

DEFAULT_PERIOD = "last-and-this-month"


class OverviewPages(Pages):
    """/workspace."""

    @signed_in
    def overview(self, session: Session):
        org, environment = session.organization, session.environment
        now = clock.now()
        today = now.date()
        # By default the month being closed beside the one under way: on 4 December, November is still
        # being invoiced while December has barely begun.
        period, problems = insights.period_of(query_parameter("period"), query_parameter("from"),
                                              query_parameter("to"), today, default=DEFAULT_PERIOD)
        # One read of the day rollups for both: the period, and the chart's last 30 days.
        chart_first = today - dt.timedelta(days=29)
        first = min(period.start or dt.date.min, chart_first)
        last = max(period.end or dt.date.max, today)
        rows = insights.activity_days(org.id, environment, first, last)
        emissions = insights.emissions_by_activity(org.id, environment, period.start or dt.date.min,
                                                   period.end or dt.date.max, rows)
        months = insights.months_by_activity(period.start, period.end, rows)
        days = insights.daily_by_activity(org.id, environment, 30, now, rows)
        latest = insights.recent(org.id, environment, insights.Filters(), 8)
        endpoint = webhook_endpoints.endpoint_for(org.id, environment)
        health = insights.endpoint_health(org.id, environment, now - dt.timedelta(days=7)) if endpoint else None
        return render("overview", 400 if problems else 200, title="Overview",
                      usage=insights.usage(org, self.test_capacity, now), period=period, problems=problems,
                      choices=insights.PERIOD_CHOICES, emissions=emissions, months=months, days=days,
                      chart=chart.daily_bars(days), latest=latest, endpoint=endpoint, health=health,
                      month_name=now.strftime("%B %Y"), **self.chrome(session, "overview"))
