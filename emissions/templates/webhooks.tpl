% rebase('layout')
<div class="pagehead">
  <h1>Webhooks</h1>
  <p class="muted">Signed <code>calculation.succeeded</code> and <code>calculation.failed</code> events · {{environment}} environment</p>
</div>
% if notice:
<p class="alert ok" role="status">{{notice}}</p>
% end
% if error:
<p class="alert error" role="alert">{{error}}</p>
% end
% if shown:
<div class="reveal" role="status">
  <h2>Signing secret</h2>
% overlap = endpoint.to_dict()['overlap_ends_at'] if endpoint is not None and endpoint.next_secret == shown['secret'] else None
% if overlap:
  <p>Shown once: give it to your receiver now. Until <time id="overlap-ends">{{overlap}}</time> deliveries are signed with the current secret (<code>X-Service-Webhook-Signature</code>) and with this one (<code>X-Service-Webhook-Signature-Next</code>); then this one is the only one.</p>
% else:
  <p>Shown once: give it to your receiver now. It verifies <code>X-Service-Webhook-Signature</code>.</p>
% end
  <div class="secretbox"><code id="new-secret">{{shown['secret']}}</code><button type="button" class="copy" data-copy="new-secret">Copy</button></div>
</div>
% end
<div class="columns">
<section class="panel grow" aria-labelledby="endpoint-title">
  <div class="panelhead"><h2 id="endpoint-title">Endpoint</h2></div>
% if endpoint is None:
  <p class="muted">No {{environment}} endpoint: events are recorded but not sent.</p>
% else:
  <p class="url"><code id="endpoint-url"><bdi>{{endpoint.url}}</bdi></code> <span class="badge {{'ok' if endpoint.status == 'enabled' else 'bad'}}">{{endpoint.status}}</span></p>
%   if endpoint.disabled_reason:
  <p class="muted small">{{endpoint.disabled_reason}}</p>
%   end
%   if endpoint.status == 'enabled' and endpoint.down_since:
  <p class="alert error" id="endpoint-down">Not answering since {{when(endpoint.down_since)}}. One delivery is tried again at <time>{{when(endpoint.down_until)}}</time>; the others wait without using their attempts and follow, oldest due first, once it answers. Retry now tries it at once.</p>
%   end
  <div class="buttons">
% for action, label, kind in (('rotate', 'Rotate secret', ''), ('test', 'Send a test event', ''), ('remove', 'Remove endpoint', 'danger')):
%   if action != 'test' or environment == 'test':
    <form method="post" action="/workspace/webhooks"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="{{action}}"><button class="{{kind}}">{{label}}</button></form>
%   end
% end
  </div>
% end
</section>
<section class="panel side" aria-labelledby="set-title">
  <div class="panelhead"><h2 id="set-title">{{'Change URL' if endpoint else 'Set an endpoint'}}</h2></div>
  <form method="post" action="/workspace/webhooks" class="stack">
    <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="set">
    <label for="w-url">URL</label>
    <input id="w-url" name="url" type="url" required maxlength="2048" value="{{url}}" placeholder="https://example.com/hooks/emissions" aria-describedby="w-url-help">
    <p class="help" id="w-url-help">{{'https and a public address' if environment == 'live' else 'http or https; a private address (localhost) only where the operator allows it'}}. A new secret is made and shown once.</p>
    <button type="submit" class="primary">Save endpoint</button>
  </form>
</section>
</div>
<section class="panel" aria-labelledby="log-title">
  <div class="panelhead"><h2 id="log-title">Delivery log</h2><p class="muted small">The 25 newest events</p></div>
% if not events:
  <p class="empty">No events yet in the {{environment}} environment.</p>
% end
  <ul class="deliveries" id="deliveries">
% for event in events:
  <li class="delivery" data-event="{{event.id}}" data-status="{{event.delivery_status}}">
    <div class="deliveryhead">
      <span class="badge {{status_class(event.delivery_status)}}">{{event.delivery_status}}</span>
      <code>{{event.type}}</code>
%   if '"test_event":true' in event.payload:  # send_test_event's mark (a client's text cannot hold it unescaped)
      <span class="badge">test event</span>
%   end
      <span class="muted small mono">{{event.id}}</span>
      <span class="muted small grow-right">{{when(event.created_at)}}</span>
%   if event.delivery_status != 'delivering':
      <form method="post" action="/workspace/webhooks/events/{{event.id}}/redeliver"><input type="hidden" name="csrf" value="{{csrf}}"><button class="small">{{'Retry now' if event.delivery_status == 'pending' else 'Redeliver'}}</button></form>
%   end
    </div>
%   if attempts[event.id]:
    <div class="tablewrap"><table class="attempts">
      <thead><tr><th scope="col">Attempt</th><th scope="col">Time</th><th scope="col">Response</th><th scope="col" class="num">Duration</th><th scope="col">Error</th></tr></thead>
      <tbody>
%     for attempt in attempts[event.id]:
        <tr><td>#{{attempt.number}}</td><td class="nowrap">{{when(attempt.attempted_at)}}</td><td><span class="badge {{'ok' if attempt.status_code and 200 <= attempt.status_code < 300 else 'bad'}}">{{attempt.status_code or 'none'}}</span></td><td class="num">{{attempt.latency_ms}} ms</td><td class="small">{{attempt.error or ''}}</td></tr>
%     end
      </tbody></table></div>
%   elif event.delivery_status == 'skipped':
    <p class="muted small">Not sent: no endpoint was set when it happened.</p>
%   else:
    <p class="muted small">No attempt yet{{'; due ' + when(event.next_attempt_at) if event.next_attempt_at else ''}}.</p>
%   end
  </li>
% end
  </ul>
</section>
