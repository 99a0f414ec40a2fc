% if defined('session'):
% rebase('layout')
% else:
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}} · Emissions</title><link rel="stylesheet" href="/workspace/static/workspace.css"><link rel="icon" href="/workspace/static/icon.svg"></head>
<body class="signin"><main id="main" class="signin-card">
% end
<h1>{{title}}</h1>
<p>{{get('message', 'The workspace could not answer this request.')}}</p>
<p class="muted small">Request id <code>{{request_id}}</code> (quote it to support).</p>
<p><a href="/workspace">Back to the overview</a></p>
% if not defined('session'):
</main></body></html>
% end
