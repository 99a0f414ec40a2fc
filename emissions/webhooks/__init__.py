"""Webhooks: signing (signing), endpoints and their address checks (endpoints), events and the outbox
(events), and delivery (delivery). Import the submodule you need."""
