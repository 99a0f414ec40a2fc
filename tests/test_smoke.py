import pytest

from conftest import post_calculation


@pytest.mark.on_both
def test_first_calculation_is_created_and_replay_returns_the_same_body(client, acme):
    first = post_calculation(client, acme, status=201)
    again = post_calculation(client, acme, status=200)
    assert again.body == first.body
    assert first.headers["Idempotent-Replayed"] == "false"
    assert again.headers["Idempotent-Replayed"] == "true"
    assert first.json["activity"] == {"value": 4000, "unit": "tkm"}
    assert first.json["emissions"] == {"value": 500.88, "unit": "kgCO2e"}
