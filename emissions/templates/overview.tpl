% rebase('layout')
<div class="pagehead">
  <h1>Overview</h1>
  <p class="muted">{{month_name}} · {{environment}} environment</p>
</div>
<section class="cards" aria-label="This month">
% for item in usage:
  <div class="card{{' current' if item.environment == environment else ''}}">
    <h2 class="label">Billable calculations · {{item.environment}}</h2>
    <p class="figure" data-usage="{{item.environment}}">{{number(item.billable)}}</p>
    <p class="muted small">Created in {{month_name}} (billing counts by creation month) · {{'of ' + number(item.capacity) if item.capacity is not None else 'no monthly cap'}}</p>
    <svg class="meter" viewBox="0 0 100 4" preserveAspectRatio="none" role="img" aria-label="{{item.percent}} percent of capacity used"><rect class="track" width="100" height="4" rx="2"/><rect class="fill{{' full' if item.percent >= 90 else ''}}" width="{{item.percent}}" height="4" rx="2"/></svg>
  </div>
% end
  <div class="card">
    <h2 class="label">Emissions by activity date · {{month_name}} · {{environment}}</h2>
    <p class="figure" data-month-kg="{{plain(month['kg'])}}">{{co2e(month['kg'])}}</p>
    <p class="muted small">{{number(month['count'])}} calculation{{'' if month['count'] == 1 else 's'}} with an activity date this month</p>
% if month['by_mode']:
    <ul class="modes">
%   for mode, numbers in month['by_mode'].items():
      <li><span class="mode mode-{{mode.lower()}}">{{'Hubs' if mode == 'HUB' else mode.title()}}</span><span>{{co2e(numbers['kg'])}}</span></li>
%   end
    </ul>
% end
  </div>
</section>

<section class="panel" aria-labelledby="chart-title">
  <div class="panelhead">
    <h2 id="chart-title">Calculations per activity day</h2>
    <p class="muted small">By activity date, the last 30 days · {{number(sum(day.count for day in days))}} in total · hover a day for its kgCO2e</p>
  </div>
  <div class="chartbox">{{!chart}}</div>
</section>

<div class="columns">
<section class="panel grow" aria-labelledby="latest-title">
  <div class="panelhead">
    <h2 id="latest-title">Latest calculations</h2>
    <a href="/workspace/calculations" class="small">View all</a>
  </div>
% if latest:
  <div class="tablewrap"><table>
    <thead><tr><th scope="col">Customer</th><th scope="col">Mode</th><th scope="col" class="num">kgCO2e</th><th scope="col">Created</th></tr></thead>
    <tbody>
%   for row in latest:
      <tr><td><a href="/workspace/calculations/{{row.id}}">{{row.customer_reference}}</a><div class="muted small"><bdi>{{row.external_reference}}</bdi></div></td>
      <td><span class="mode mode-{{row.mode.lower()}}">{{row.mode.title()}}</span></td>
      <td class="num">{{kg(row.emissions_kg)}}</td><td class="nowrap">{{when(row.created_at)}}</td></tr>
%   end
    </tbody></table></div>
% else:
  <div class="empty"><p>No calculations in the {{environment}} environment yet.</p>
  <p class="muted small">Create a {{environment}} key under <a href="/workspace/keys">API keys</a> and POST to <code>/v1/emissions/logistics</code>.</p></div>
% end
</section>

<section class="panel side" aria-labelledby="hook-title">
  <div class="panelhead"><h2 id="hook-title">Webhook endpoint</h2><a href="/workspace/webhooks" class="small">Manage</a></div>
% if endpoint is None:
  <p class="muted">No {{environment}} endpoint. Events are recorded but not sent.</p>
% else:
  <p class="url"><code><bdi>{{endpoint.url}}</bdi></code></p>
  <p><span class="badge {{'ok' if endpoint.status == 'enabled' else 'bad'}}">{{endpoint.status}}</span></p>
%   counts = health['counts']
  <dl class="facts">
    <dt>Delivered (7 days)</dt><dd>{{number(counts.get('succeeded', 0))}}</dd>
    <dt>Retrying</dt><dd>{{number(counts.get('pending', 0) + counts.get('delivering', 0))}}</dd>
    <dt>Failed</dt><dd>{{number(counts.get('failed', 0))}}</dd>
%   last = health['last_attempt']
    <dt>Last attempt</dt><dd>{{'—' if last is None else (str(last.status_code or 'no answer') + ' · ' + when(last.attempted_at))}}</dd>
  </dl>
% end
</section>
</div>
