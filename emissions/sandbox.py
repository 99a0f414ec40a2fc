"""The sandbox's seed: an organization, the shipped factor library, a demo customer and a test key.

One home for `emissions quickstart` and `emissions.testing.Sandbox`; each row is in the audit trail
as when made by its own command.
"""
from __future__ import annotations

from . import auth
from . import customers
from . import factor_files
from . import keys
from . import organizations
from .db import db
from .models import SCOPES, Organization

SLUG = "sandbox"
NAME = "Sandbox"
ENVIRONMENT = "test"
DEMO_CUSTOMER = "demo-customer"
DEMO_CUSTOMER_NAME = "Demo Customer Ltd"
DEMO_COUNTRY = "GB"
QUICKSTART_FACTOR = "desnz-2025-road-hgv-diesel-average-laden"
ALL_SCOPES = tuple(SCOPES)


def add_customer(organization: Organization, reference: str, name: str, country: str | None, *, actor: str) -> None:
    """A customer of the sandbox organization in the test environment."""
    customers.create(organization, ENVIRONMENT, reference, name, country, actor=actor)


def new_test_key(organization: Organization, *, actor: str, secret_key: str | None, name: str,
             scopes=ALL_SCOPES) -> str:
    """A new test key of the sandbox organization; its plain value (the sandbox never makes a live key)."""
    _, plain = keys.create(organization, ENVIRONMENT, list(scopes), secret=auth.instance_secret(secret_key),
                           name=name, actor=actor)
    return plain


def seed(*, actor: str, secret_key: str | None, key_name: str, customer_reference: str = DEMO_CUSTOMER,
         customer_name: str = DEMO_CUSTOMER_NAME) -> tuple[Organization, str]:
    """Load the factor library, create the organization and the customer where missing, and make a new
    test key, in one transaction (all of it or none); return the organization and the key's plain value."""
    with db.atomic():
        factor_files.load_library(actor=actor)
        organization = organizations.find(SLUG)
        if organization is None:
            organization = organizations.create(NAME, slug=SLUG, actor=actor)
        if customers.find(organization.id, ENVIRONMENT, customer_reference) is None:
            add_customer(organization, customer_reference, customer_name, DEMO_COUNTRY, actor=actor)
        plain = new_test_key(organization, actor=actor, secret_key=secret_key, name=key_name)
    return organization, plain
