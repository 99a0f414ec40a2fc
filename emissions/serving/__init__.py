"""Serving the app: Waitress and the ways it is adapted (server, adaptations), several worker
processes on one port (workers), the trusted reverse proxies (proxies), and what only a serving
process does to SQLite (writer_lock, wal_checkpoint).

The domain never imports this package (tests/test_serving_apart.py): the command line's `serve`
and the test harness's sandbox server are its only callers.
"""
