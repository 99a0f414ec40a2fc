% rebase('layout')
<p class="crumbs"><a href="/workspace/keys">API keys</a> / revoke</p>
<section class="panel narrow confirm">
  <h1>Revoke <bdi>{{key.name or 'this key'}}</bdi>?</h1>
  <p><code>{{key.prefix}}…</code> ({{key.environment}}) stops working at once: every request with it gets <code>401 API_KEY_REVOKED</code>. This cannot be undone.</p>
% if key.revoked_at:
  <p class="muted">It is already revoked.</p>
% else:
  <form method="post" action="/workspace/keys/{{key.id}}/revoke" class="buttons">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <button type="submit" class="danger">Revoke key</button>
    <a href="/workspace/keys" class="button">Cancel</a>
  </form>
% end
</section>
