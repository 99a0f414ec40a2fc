"""An endpoint known to be down (a backlog does not slow the API; docs/webhooks.md "Delivery").

- webhook_endpoint.down_since: when its receiver stopped answering (a connection error, a time-out,
  a 5xx or 429 on every attempt of a round); null while it answers.
- webhook_endpoint.down_until: when the next probe may go out. Until then the claim takes none of
  its deliveries, and then only one (the oldest due), so a receiver that is down costs one attempt
  and one write per probe, however long its backlog.
"""


def up(migrator, db):
    db.execute_sql("ALTER TABLE webhook_endpoint ADD COLUMN down_since TIMESTAMP")
    db.execute_sql("ALTER TABLE webhook_endpoint ADD COLUMN down_until TIMESTAMP")
