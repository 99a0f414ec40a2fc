"""The overview: this month's usage and emissions, the last 30 days drawn, the latest calculations."""
from __future__ import annotations

import datetime as dt

from ... import clock
from ...webhooks import endpoints as webhook_endpoints
from .. import chart
from .. import insights
from ...accounts import Session
from ..rendering import render
from ..session import Pages, signed_in


class OverviewPages(Pages):
    """/workspace."""

    @signed_in
    def overview(self, session: Session):
        org, environment = session.organization, session.environment
        now = clock.now()
        first, last = insights.period_dates("this-month", now.date())
        # One read of the day rollups for both: this month, and the chart's last 30 days.
        chart_first = now.date() - dt.timedelta(days=29)
        rows = insights.activity_days(org.id, environment, min(first, chart_first), max(last, now.date()))
        month = insights.emissions_by_activity(org.id, environment, first, last, rows)
        days = insights.daily_by_activity(org.id, environment, 30, now, rows)
        latest = insights.recent(org.id, environment, insights.Filters(), 8)
        endpoint = webhook_endpoints.endpoint_for(org.id, environment)
        health = insights.endpoint_health(org.id, environment, now - dt.timedelta(days=7)) if endpoint else None
        return render("overview", title="Overview", usage=insights.usage(org, self.test_capacity, now),
                      month=month, days=days, chart=chart.daily_bars(days), latest=latest, endpoint=endpoint,
                      health=health, month_name=now.strftime("%B %Y"), **self.chrome(session, "overview"))
