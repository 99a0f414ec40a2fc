"""Shipments: transport chains of legs and hubs (docs/api.md "Shipments").

- factor.hub_type: the hub type of a HUB factor (kgCO2e per tonne handled); null for the others.
- shipment: one row per chain, holding the exact JSON the API answered, its idempotency key and
  totals; its legs are calculation rows (their body names the shipment), its hubs are below.
- shipment_hub: one row per hub element, what the customer analytics' `hubs` block and
  `analytics verify` count.

Frozen copies: never import models.py here.
"""
import peewee as pw


class ExactDecimal(pw.Field):
    field_type = "EXACTDECIMAL"  # NUMERIC on PostgreSQL, TEXT on SQLite (see models.py)


def up(migrator, db):
    db.execute_sql("ALTER TABLE factor ADD COLUMN hub_type VARCHAR(32)")

    class Base(pw.Model):
        class Meta:
            database = db
            legacy_table_names = False

    class Organization(Base):
        class Meta:
            table_name = "organization"

    class Customer(Base):
        class Meta:
            table_name = "customer"

    class Factor(Base):
        class Meta:
            table_name = "factor"

    class Shipment(Base):
        id = pw.CharField(primary_key=True, max_length=36)
        organization = pw.ForeignKeyField(Organization, on_delete="CASCADE", index=False)
        environment = pw.CharField(max_length=4)
        customer = pw.ForeignKeyField(Customer, on_delete="CASCADE")
        external_reference = pw.CharField(max_length=120)
        idempotency_key = pw.CharField(max_length=200)
        fingerprint = pw.CharField(max_length=64)
        business_context = pw.CharField(max_length=12)
        activity_date = pw.DateField()
        cargo_tonnes = ExactDecimal()
        element_count = pw.IntegerField()
        activity_tkm = ExactDecimal()
        emissions_kg = ExactDecimal()
        emissions_ttw_kg = ExactDecimal()
        emissions_wtt_kg = ExactDecimal()
        request_id = pw.CharField(max_length=36)
        body = pw.TextField()
        created_at = pw.DateTimeField()

        class Meta:
            indexes = ((("organization", "environment", "idempotency_key"), True),
                       (("organization", "environment", "created_at", "id"), False))

    class ShipmentHub(Base):
        shipment = pw.ForeignKeyField(Shipment, on_delete="CASCADE", index=False)
        element_index = pw.IntegerField()
        customer = pw.ForeignKeyField(Customer, on_delete="CASCADE")
        environment = pw.CharField(max_length=4)
        hub_type = pw.CharField(max_length=32)
        business_context = pw.CharField(max_length=12)
        activity_date = pw.DateField()
        tonnes = ExactDecimal()
        emissions_kg = ExactDecimal()
        emissions_ttw_kg = ExactDecimal(null=True)
        emissions_wtt_kg = ExactDecimal(null=True)
        factor = pw.ForeignKeyField(Factor, on_delete="RESTRICT", index=False)
        factor_version = pw.IntegerField()
        factor_value = ExactDecimal()

        class Meta:
            table_name = "shipment_hub"
            indexes = ((("shipment", "element_index"), True),)

    db.create_tables([Shipment, ShipmentHub])
