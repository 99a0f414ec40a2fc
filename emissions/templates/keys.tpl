% rebase('layout')
<div class="pagehead">
  <h1>API keys</h1>
  <p class="muted">{{environment.capitalize()}} keys start with <code>service_{{environment}}_</code></p>
</div>
% if error:
<p class="alert error" role="alert">{{error}}</p>
% end
% if shown:
<div class="reveal" role="status">
  <h2>Your new key<bdi>{{': ' + shown['name'] if shown['name'] else ''}}</bdi></h2>
  <p>Shown once. Store it in a secret manager now; it cannot be shown again.</p>
  <div class="secretbox"><code id="new-key">{{shown['key']}}</code><button type="button" class="copy" data-copy="new-key">Copy</button></div>
</div>
% end
<section class="panel">
% if keys:
  <div class="tablewrap"><table id="keys">
    <thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Status</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
    <tbody>
%   for key in keys:
%     status = 'revoked' if key.revoked_at else 'expired' if key.expires_at and key.expires_at <= now else 'active'
      <tr data-key="{{key.id}}"><td><bdi>{{key.name or 'Untitled'}}</bdi><div class="muted small">{{key.environment}}</div></td><td class="mono nowrap">{{key.prefix}}…</td>
      <td class="small words">{{', '.join(sorted(key.scope_set))}}</td><td class="nowrap">{{day(key.created_at)}}</td>
      <td class="nowrap">{{when(key.last_used_at) if key.last_used_at else 'Never'}}</td><td class="nowrap">{{day(key.expires_at) if key.expires_at else 'Never'}}</td>
      <td><span class="badge {{status_class(status)}}">{{status}}</span></td>
      <td>{{!'<a class="button small danger" href="/workspace/keys/' + key.id + '/revoke">Revoke</a>' if status != 'revoked' else ''}}</td></tr>
%   end
    </tbody></table></div>
% else:
  <div class="empty"><p>No {{environment}} keys yet.</p></div>
% end
</section>
<section class="panel narrow" aria-labelledby="create-title">
  <div class="panelhead"><h2 id="create-title">Create a key</h2></div>
  <form method="post" action="/workspace/keys" class="stack">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <label for="k-name">Name</label><input id="k-name" name="name" maxlength="200" value="{{form.get('name', '')}}" placeholder="e.g. billing-service">
    <label for="k-env">Environment</label>
    <select id="k-env" name="environment">
% for env in ('test', 'live'):
      <option value="{{env}}"{{!' selected' if form.get('environment', environment) == env else ''}}>{{env}}</option>
% end
    </select>
    <fieldset><legend>Scopes</legend>
% for scope in scopes:
      <label class="check"><input type="checkbox" name="scopes" value="{{scope}}"{{!' checked' if scope in form.get('scopes', []) else ''}}> <code>{{scope}}</code></label>
% end
    </fieldset>
    <label for="k-expires">Expires (optional, UTC date)</label><input id="k-expires" name="expires_on" type="date" value="{{form.get('expires_on', '')}}">
    <button type="submit" class="primary">Create key</button>
  </form>
</section>
