% rebase('layout')
<div class="pagehead">
  <h1>Overview</h1>
  <p class="muted">{{environment}} environment</p>
</div>
<form class="filters period" method="get" action="/workspace" aria-label="Period">
  <div class="field"><label for="o-period">Emissions period (by activity date)</label><select id="o-period" name="period">
% for value, name in choices:
    <option value="{{value}}"{{!' selected' if period.choice == value else ''}}>{{name}}</option>
% end
  </select></div>
  <div class="field"><label for="o-from">From</label><input id="o-from" name="from" type="date" value="{{period.start.isoformat() if period.choice == 'custom' and period.start else ''}}" aria-describedby="o-dates-help"></div>
  <div class="field"><label for="o-to">To</label><input id="o-to" name="to" type="date" value="{{period.end.isoformat() if period.choice == 'custom' and period.end else ''}}" aria-describedby="o-dates-help"></div>
  <div class="actions"><button type="submit" class="primary">Show</button></div>
  <p class="help" id="o-dates-help">A from or to date makes the period custom; both are included.</p>
</form>
% for problem in problems:
<p class="alert error" role="alert">{{problem}}</p>
% end
<section class="cards" aria-label="Usage and emissions">
% for item in usage:
  <div class="card{{' current' if item.environment == environment else ''}}">
%   if item.environment == 'test':
    <h2 class="label">Test calculations · {{month_name}}</h2>
    <p class="figure" data-usage="test">{{number(item.billable)}}</p>
    <p class="muted small">Created in {{month_name}} (the allowance counts by creation month) · {{'of ' + number(item.capacity) + ' allowed' if item.capacity is not None else 'no monthly cap'}} · never invoiced</p>
%   else:
    <h2 class="label">Billable calculations · live · {{month_name}}</h2>
    <p class="figure" data-usage="live">{{number(item.billable)}}</p>
    <p class="muted small">Created in {{month_name}} (billing counts by creation month) · {{'of ' + number(item.capacity) if item.capacity is not None else 'no monthly cap'}}</p>
%   end
    <svg class="meter" viewBox="0 0 100 4" preserveAspectRatio="none" role="img" aria-label="{{item.percent}} percent of capacity used"><rect class="track" width="100" height="4" rx="2"/><rect class="fill{{' full' if item.percent >= 90 else ''}}" width="{{item.percent}}" height="4" rx="2"/></svg>
  </div>
% end
% unit = co2e_unit(emissions['kg'], *[month['kg'] for month in months])
  <div class="card" id="emissions" data-from="{{period.start.isoformat() if period.start else ''}}" data-to="{{period.end.isoformat() if period.end else ''}}">
    <h2 class="label">Emissions by activity date · {{environment}}</h2>
    <p class="figure" data-month-kg="{{plain(emissions['kg'])}}">{{unit.text(emissions['kg'])}}</p>
    <p class="muted small">{{number(emissions['count'])}} calculation{{'' if emissions['count'] == 1 else 's'}} · {{period.label if period.start is None and period.end is None else 'activity dates ' + period.label}}</p>
% if months:
    <ul class="modes" id="months">
%   for month in months:
      <li data-month="{{month['month']}}" data-kg="{{plain(month['kg'])}}"><span>{{month['month']}}</span><span>{{unit.text(month['kg'])}}</span></li>
%   end
    </ul>
% end
% if emissions['by_mode']:
    <ul class="modes">
%   for mode, numbers in emissions['by_mode'].items():
      <li><span class="mode mode-{{mode.lower()}}">{{'Hubs' if mode == 'HUB' else mode.title()}}</span><span>{{unit.text(numbers['kg'])}}</span></li>
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
