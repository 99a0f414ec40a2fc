<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="0">
<title>Signing in · Emissions</title>
<link rel="stylesheet" href="/workspace/static/workspace.css"><link rel="icon" href="/workspace/static/icon.svg">
</head>
<body class="signin">
<main id="main" class="signin-card">
  <p class="brand"><span class="logo" aria-hidden="true">e</span> Emissions</p>
  <h1 role="status">Signing you in…</h1>
  <p class="muted small">Checking your password. <a href="/workspace/login/wait">Continue</a> if this page stays.</p>
</main>
</body>
</html>
