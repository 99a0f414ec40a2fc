"""The files people take away: one row type for a calculation (rows.py) and the writers built on it
(csv.py, html.py), beside the JSON bodies the API answers and webhooks send (views.py)."""
