<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Emissions</title>
<link rel="stylesheet" href="/workspace/static/workspace.css"><link rel="icon" href="/workspace/static/icon.svg">
</head>
<body class="signin">
<main id="main" class="signin-card">
  <p class="brand"><span class="logo" aria-hidden="true">e</span> Emissions</p>
  <h1>Sign in to your workspace</h1>
% if error:
  <p class="alert error" role="alert">{{error}}</p>
% end
  <form method="post" action="/workspace/login" class="stack">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <label for="email">Email</label>
    <input id="email" name="email" type="email" required autocomplete="username" value="{{email}}" maxlength="254" autofocus>
    <label for="password">Password</label>
    <input id="password" name="password" type="password" required autocomplete="current-password">
    <button type="submit" class="primary wide">Sign in</button>
  </form>
  <p class="muted small">No account? An operator creates one with <code>emissions user create</code>.</p>
</main>
</body>
</html>
