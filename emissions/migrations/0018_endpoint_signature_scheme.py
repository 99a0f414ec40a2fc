"""An endpoint's signature scheme (docs/webhooks.md "Standard Webhooks").

- webhook_endpoint.signature: "service" (the X-Service-Webhook-* headers, the default every
  existing endpoint keeps) or "standard" (the Standard Webhooks headers webhook-id,
  webhook-timestamp and webhook-signature).
"""


def up(migrator, db):
    db.execute_sql("ALTER TABLE webhook_endpoint ADD COLUMN signature VARCHAR(16) NOT NULL DEFAULT 'service'")
