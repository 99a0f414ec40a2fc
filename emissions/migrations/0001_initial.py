"""The initial schema. Frozen copies of the models as they were: never import models.py here."""
import peewee as pw


class ExactDecimal(pw.Field):
    field_type = "EXACTDECIMAL"  # NUMERIC on PostgreSQL, TEXT on SQLite (see models.py)


def up(migrator, db):
    class Base(pw.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class InstanceSecret(Base):
        name = pw.CharField(primary_key=True, max_length=40)
        value = pw.CharField(max_length=128)

    class Organization(Base):
        slug = pw.CharField(unique=True, max_length=64)
        name = pw.CharField(max_length=200)
        status = pw.CharField(max_length=16, default="active")
        entitled = pw.BooleanField(default=True)
        live_capacity = pw.IntegerField(null=True)
        test_capacity = pw.IntegerField(null=True)
        created_at = pw.DateTimeField()

    class ApiKey(Base):
        id = pw.CharField(primary_key=True, max_length=40)
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        key_hash = pw.CharField(unique=True, max_length=64)
        prefix = pw.CharField(max_length=24)
        name = pw.CharField(max_length=200, default="")
        scopes = pw.TextField()
        expires_at = pw.DateTimeField(null=True)
        revoked_at = pw.DateTimeField(null=True)
        created_at = pw.DateTimeField()

    class Factor(Base):
        reference = pw.CharField(max_length=120, index=True)
        version = pw.IntegerField()
        organization = pw.ForeignKeyField(Organization, null=True, on_delete="CASCADE")
        status = pw.CharField(max_length=16)
        mode = pw.CharField(max_length=8)
        value = ExactDecimal()
        ttw_value = ExactDecimal(null=True)
        wtt_value = ExactDecimal(null=True)
        name = pw.CharField(max_length=200)
        source = pw.CharField(max_length=300)
        region = pw.CharField(max_length=64, null=True)
        valid_from = pw.DateField(null=True)
        valid_to = pw.DateField(null=True)
        created_at = pw.DateTimeField()

        class Meta:
            indexes = ((("reference", "version"), True),)

    class Customer(Base):
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        reference = pw.CharField(max_length=120)
        name = pw.CharField(max_length=200)
        status = pw.CharField(max_length=16, default="active")
        country_code = pw.CharField(max_length=2, null=True)
        created_at = pw.DateTimeField()

        class Meta:
            indexes = ((("organization", "environment", "reference"), True),)

    class Calculation(Base):
        id = pw.CharField(primary_key=True, max_length=36)
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        customer = pw.ForeignKeyField(Customer, on_delete="CASCADE")
        external_reference = pw.CharField(max_length=120)
        idempotency_key = pw.CharField(max_length=200)
        fingerprint = pw.CharField(max_length=64)
        mode = pw.CharField(max_length=8)
        business_context = pw.CharField(max_length=12)
        activity_date = pw.DateField()
        cargo_tonnes = ExactDecimal()
        distance_km = ExactDecimal()
        activity_tkm = ExactDecimal()
        emissions_kg = ExactDecimal()
        factor = pw.ForeignKeyField(Factor, on_delete="RESTRICT")
        factor_version = pw.IntegerField()
        factor_value = ExactDecimal()
        request_id = pw.CharField(max_length=36)
        body = pw.TextField()
        created_at = pw.DateTimeField()

        class Meta:
            indexes = ((("organization", "environment", "idempotency_key"), True),)

    class CustomerRollup(Base):
        customer = pw.ForeignKeyField(Customer, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        mode = pw.CharField(max_length=8)
        business_context = pw.CharField(max_length=12)
        calculation_count = pw.BigIntegerField(default=0)
        activity_tkm = ExactDecimal()
        emissions_kg = ExactDecimal()
        first_activity_date = pw.DateField()
        last_activity_date = pw.DateField()

        class Meta:
            indexes = ((("customer", "environment", "mode", "business_context"), True),)

    class UsageCounter(Base):
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        period = pw.CharField(max_length=7)
        count = pw.BigIntegerField(default=0)

        class Meta:
            indexes = ((("organization", "environment", "period"), True),)

    class WebhookEndpoint(Base):
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        url = pw.CharField(max_length=2048)
        secret = pw.CharField(max_length=100)
        status = pw.CharField(max_length=16, default="enabled")
        disabled_reason = pw.CharField(max_length=200, null=True)
        created_at = pw.DateTimeField()
        updated_at = pw.DateTimeField()

        class Meta:
            indexes = ((("organization", "environment"), True),)

    class WebhookEvent(Base):
        id = pw.CharField(primary_key=True, max_length=36)
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        type = pw.CharField(max_length=40)
        payload = pw.TextField()
        created_at = pw.DateTimeField()
        delivery_status = pw.CharField(max_length=12, index=True)
        attempt_count = pw.IntegerField(default=0)
        next_attempt_at = pw.DateTimeField(null=True, index=True)
        locked_until = pw.DateTimeField(null=True)
        lock_token = pw.CharField(max_length=36, null=True)
        delivered_at = pw.DateTimeField(null=True)

    class WebhookAttempt(Base):
        event = pw.ForeignKeyField(WebhookEvent, on_delete="CASCADE")
        number = pw.IntegerField()
        url = pw.CharField(max_length=2048)
        attempted_at = pw.DateTimeField()
        status_code = pw.IntegerField(null=True)
        latency_ms = pw.IntegerField(null=True)
        error = pw.CharField(max_length=500, null=True)
        response_excerpt = pw.CharField(max_length=1000, null=True)

    class User(Base):
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE")
        email = pw.CharField(unique=True, max_length=254)
        password_hash = pw.CharField(max_length=200)
        created_at = pw.DateTimeField()

    db.create_tables([
        InstanceSecret, Organization, ApiKey, Factor, Customer, Calculation, CustomerRollup,
        UsageCounter, WebhookEndpoint, WebhookEvent, WebhookAttempt, User,
    ])
    # At most one active version of a factor reference, enforced by the database itself.
    db.execute_sql(
        "CREATE UNIQUE INDEX factor_one_active ON factor (reference) WHERE status = 'active'"
    )
    # Customers' calculations in time order, for listing and for rebuilding analytics.
    db.execute_sql(
        "CREATE INDEX calculation_customer_created ON calculation (customer_id, created_at)"
    )
