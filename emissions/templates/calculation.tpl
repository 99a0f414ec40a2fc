% rebase('layout')
<p class="crumbs"><a href="/workspace/calculations">Calculations</a> / <span class="mono">{{calculation['id']}}</span></p>
<div class="pagehead">
  <h1><bdi>{{calculation['external_reference']}}</bdi></h1>
  <p class="muted">{{calculation['customer']['reference']}} · <span class="mode mode-{{calculation['mode'].lower()}}">{{calculation['mode'].title()}}</span> · created {{calculation['created_at']}}</p>
</div>
<section class="cards">
  <div class="card"><h2 class="label">Emissions</h2><p class="figure" data-value="{{plain(calculation['emissions']['value'])}}">{{co2e(calculation['emissions']['value'])}}</p></div>
  <div class="card"><h2 class="label">Activity</h2><p class="figure">{{kg(calculation['activity']['value'])}} <span class="unit">tkm</span></p>
    <p class="muted small">{{calculation['cargo']['value']}} t × {{calculation['distance']['value']}} km</p></div>
  <div class="card"><h2 class="label">Methodology</h2><p>{{calculation['methodology']['standard']}} · {{calculation['methodology']['boundary']}}</p>
    <p class="muted small">{{calculation['methodology']['business_context']}} · Scope 3 category {{calculation['methodology']['scope3_category']}}</p></div>
</section>
<div class="columns">
<section class="panel grow" aria-labelledby="lineage-title">
  <div class="panelhead"><h2 id="lineage-title">Factor lineage</h2></div>
  <dl class="facts" id="lineage">
% for name in ('reference', 'version', 'name', 'source', 'region', 'mode', 'unit', 'valid_from', 'valid_to'):
    <dt>{{name.replace('_', ' ').capitalize()}}</dt><dd><bdi>{{'—' if calculation['factor'].get(name) is None else calculation['factor'][name]}}</bdi></dd>
% end
  </dl>
</section>
<section class="panel side" aria-labelledby="events-title">
  <div class="panelhead"><h2 id="events-title">Webhook events</h2></div>
% if not events:
  <p class="muted">No event found for this calculation.</p>
% end
% for event in events:
  <div class="event">
    <p><code>{{event.type}}</code> <span class="badge {{status_class(event.delivery_status)}}">{{event.delivery_status}}</span></p>
    <p class="muted small mono">{{event.id}}</p>
%   for attempt in attempts[event.id]:
    <p class="small">#{{attempt.number}} · {{when(attempt.attempted_at)}} · {{attempt.status_code or 'no answer'}} · {{attempt.latency_ms}} ms{{(' · ' + attempt.error) if attempt.error else ''}}</p>
%   end
%   if event.delivery_status != 'delivering':
    <form method="post" action="/workspace/webhooks/events/{{event.id}}/redeliver"><input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="next" value="/workspace/calculations/{{calculation['id']}}"><button>{{'Retry now' if event.delivery_status == 'pending' else 'Redeliver'}}</button></form>
%   end
  </div>
% end
</section>
</div>
<section class="panel" aria-labelledby="body-title">
  <div class="panelhead"><h2 id="body-title">Stored response</h2><p class="muted small">Exactly what <code>GET /v1/calculations/{{calculation['id']}}</code> answers</p></div>
  <pre class="code" tabindex="0">{{pretty}}</pre>
</section>
