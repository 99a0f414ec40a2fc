"""The webhook scheduler `emissions serve` runs: an APScheduler job delivering what is due."""
from __future__ import annotations

import datetime as dt
import logging

from apscheduler.schedulers.background import BackgroundScheduler

from .config import Config
from .webhooks import Deliverer

JOB_ID = "deliver-webhooks"


class WebhookScheduler:
    """The running scheduler and its deliverer; shutdown() lets the delivery in hand finish."""

    def __init__(self, scheduler: BackgroundScheduler, deliverer: Deliverer):
        self.scheduler = scheduler
        self.deliverer = deliverer

    def shutdown(self, wait: bool = True) -> None:
        self.deliverer.stop()
        self.scheduler.shutdown(wait=wait)
        self.deliverer.close()


def start(config: Config) -> WebhookScheduler:
    """Start delivering every WEBHOOK_POLL_SECONDS in a background thread (the database must be bound)."""
    # A run that outlasts the interval makes APScheduler warn on every skipped tick; that is expected.
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    deliverer = Deliverer(config)
    scheduler = BackgroundScheduler(timezone=dt.timezone.utc, job_defaults={
        "max_instances": 1, "coalesce": True, "misfire_grace_time": None})
    scheduler.add_job(deliverer.tick, "interval", seconds=config.webhook_poll_seconds, id=JOB_ID,
                      next_run_time=dt.datetime.now(dt.timezone.utc))
    scheduler.start()
    return WebhookScheduler(scheduler, deliverer)
