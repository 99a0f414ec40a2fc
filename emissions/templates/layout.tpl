<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}} · {{session.organization.name}} · Emissions</title>
<link rel="stylesheet" href="/workspace/static/workspace.css"><link rel="icon" href="/workspace/static/icon.svg">
<script src="/workspace/static/workspace.js" defer></script>
</head>
<body class="env-{{environment}}">
<a class="skip" href="#main">Skip to content</a>
<header class="topbar">
  <a class="brand" href="/workspace"><span class="logo" aria-hidden="true">e</span><span class="org"><bdi>{{session.organization.name}}</bdi></span></a>
  <form class="envswitch" method="post" action="/workspace/environment" aria-label="Environment">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <input type="hidden" name="next" value="{{path}}">
    <span class="envlabel" id="env-label">Environment</span>
    <button name="environment" value="test" aria-pressed="{{'true' if environment == 'test' else 'false'}}" aria-describedby="env-label">Test</button>
    <button name="environment" value="live" aria-pressed="{{'true' if environment == 'live' else 'false'}}" aria-describedby="env-label">Live</button>
  </form>
  <div class="account">
    <span class="who"><bdi>{{session.user.email}}</bdi></span>
    <form method="post" action="/workspace/logout"><input type="hidden" name="csrf" value="{{csrf}}"><button class="link">Sign out</button></form>
  </div>
</header>
% if environment == 'test':
<div class="testbar" role="note">Test environment: test keys, test customers and test data only. Test calculations count toward the monthly test allowance and are never invoiced.</div>
% end
<div class="shell">
<nav class="sidebar" aria-label="Workspace">
% for href, key, label in (("/workspace", "overview", "Overview"), ("/workspace/calculations", "calculations", "Calculations"), ("/workspace/shipments", "shipments", "Shipments"), ("/workspace/customers", "customers", "Customers"), ("/workspace/webhooks", "webhooks", "Webhooks"), ("/workspace/keys", "keys", "API keys"), ("/workspace/team", "team", "Team"), ("/workspace/audit", "audit", "Audit")):
  <a href="{{href}}"{{!' aria-current="page"' if active == key else ''}}>{{label}}</a>
% end
</nav>
<main id="main" tabindex="-1">
{{!base}}
</main>
</div>
</body>
</html>
