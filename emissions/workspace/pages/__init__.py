"""The workspace's pages, one module per section; each is a class of handlers over the shared state
(session.Pages), and routes.Workspace is all of them together."""
