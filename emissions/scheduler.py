"""The webhook scheduler `emissions serve` runs: an APScheduler job delivering what is due."""
from __future__ import annotations

import datetime as dt
import logging

from apscheduler.schedulers.background import BackgroundScheduler

from .config import Config
from .db import db
from .webhooks import events as webhook_events
from .webhooks.delivery import Deliverer

JOB_ID = "deliver-webhooks"
PRUNE_JOB_ID = "prune-webhooks"
SCHEDULER_ACTOR = "scheduler"  # the audit trail's actor for what RETENTION_DAYS deletes

log = logging.getLogger("emissions.webhooks")


def prune_job(retention_days: int):
    """The daily job RETENTION_DAYS asks for: delete finished webhook events older than that."""
    def run() -> None:
        try:
            deleted = webhook_events.prune(dt.timedelta(days=retention_days), actor=SCHEDULER_ACTOR)
            log.info("pruned webhook events", extra={"fields": {"pruned": deleted, "older_than_days": retention_days}})
        except Exception:
            log.exception("pruning webhook events failed; tomorrow's run retries")
        finally:
            db.close()  # this thread's connection, opened for the run
    return run


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
    if config.retention_days:
        scheduler.add_job(prune_job(config.retention_days), "interval", hours=24, id=PRUNE_JOB_ID,
                          next_run_time=dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1))
    scheduler.start()
    return WebhookScheduler(scheduler, deliverer)
