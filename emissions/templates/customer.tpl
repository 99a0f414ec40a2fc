% rebase('layout')
<p class="crumbs"><a href="/workspace/customers">Customers</a> / <span class="mono">{{customer['reference']}}</span></p>
<div class="pagehead">
  <h1><bdi>{{customer['name']}}</bdi> <span class="badge {{status_class(customer['status'])}}">{{customer['status']}}</span></h1>
  <p class="muted">{{customer['reference']}} · {{customer['country_code'] or 'no country'}} · {{environment}} environment</p>
</div>
% if error:
<p class="alert error" role="alert">{{error}}</p>
% end
<form class="filters period" method="get" action="{{customer_path(customer['reference'])}}" aria-label="Period">
  <div class="field"><label for="p-period">Period (by activity date)</label><select id="p-period" name="period">
% for value, name in choices:
    <option value="{{value}}"{{!' selected' if period.choice == value else ''}}>{{name}}</option>
% end
  </select></div>
  <div class="field"><label for="p-from">From</label><input id="p-from" name="from" type="date" value="{{period.start.isoformat() if period.choice == 'custom' and period.start else ''}}" aria-describedby="p-dates-help"></div>
  <div class="field"><label for="p-to">To</label><input id="p-to" name="to" type="date" value="{{period.end.isoformat() if period.choice == 'custom' and period.end else ''}}" aria-describedby="p-dates-help"></div>
  <div class="actions"><button type="submit" class="primary">Show</button> <a href="{{csv_url}}" class="button" download>Download CSV</a> <a href="{{statement_url}}" class="button">Printable statement</a></div>
  <p class="help" id="p-dates-help">A from or to date makes the period custom; both are included.</p>
</form>
% for problem in problems:
<p class="alert error" role="alert">{{problem}}</p>
% end
<p class="muted" id="period" data-from="{{analytics['period']['from'] or ''}}" data-to="{{analytics['period']['to'] or ''}}">Activity dates {{period.label}}</p>
<section class="cards" aria-label="Analytics" id="analytics">
  <div class="card"><h2 class="label">Shipments</h2><p class="figure" data-field="shipment_count" data-value="{{counts['shipment_count']}}">{{number(counts['shipment_count'])}}</p></div>
  <div class="card"><h2 class="label">Single calculations</h2><p class="figure" data-field="single_calculation_count" data-value="{{counts['single_calculation_count']}}">{{number(counts['single_calculation_count'])}}</p>
    <p class="muted small">Calculations, each shipment leg counted: <span data-field="calculation_count" data-value="{{analytics['calculation_count']}}">{{number(analytics['calculation_count'])}}</span></p></div>
  <div class="card"><h2 class="label">Emissions</h2><p class="figure" data-field="emissions" data-value="{{plain(analytics['emissions']['value'])}}">{{co2e(analytics['emissions']['value'])}}</p>
% breakdown = analytics['emissions'].get('breakdown') or {}
% unit = co2e_unit(analytics['emissions']['value'])
% if breakdown:
    <p class="muted small">TTW {{unit.text(breakdown['ttw'])}} · WTT {{unit.text(breakdown['wtt'])}}{{' · not split ' + unit.text(breakdown['unattributed']) if breakdown.get('unattributed') else ''}}</p>
% end
  </div>
  <div class="card"><h2 class="label">Activity</h2><p class="figure"><span data-field="activity" data-value="{{plain(analytics['activity']['value'])}}">{{kg(analytics['activity']['value'])}}</span> <span class="unit">tkm</span></p></div>
  <div class="card"><h2 class="label">Activity dates</h2><p>{{analytics['first_activity_date'] or '—'}} → {{analytics['last_activity_date'] or '—'}}</p></div>
</section>
<section class="panel" aria-labelledby="months-title">
  <div class="panelhead"><h2 id="months-title">Emissions per month</h2><p class="muted small">By activity month, stacked by mode · hover a part for its amount</p></div>
  <div class="chartbox">{{!chart}}</div>
</section>
<div class="columns">
<section class="panel grow" aria-labelledby="split-title">
  <div class="panelhead"><h2 id="split-title">By mode</h2></div>
% if analytics['by_mode'] or analytics.get('hubs'):
%   hubs = analytics.get('hubs')
%   unit = co2e_unit(*[numbers['emissions']['value'] for numbers in analytics['by_mode'].values()], hubs['emissions']['value'] if hubs else None)
  <div class="tablewrap"><table id="by-mode">
    <thead><tr><th scope="col">Mode</th><th scope="col" class="num wide">Calculations</th><th scope="col" class="num">Activity</th><th scope="col" class="num">Emissions <span class="unit">{{unit.name}}</span></th></tr></thead>
    <tbody>
%   for name, numbers in analytics['by_mode'].items():
      <tr data-mode="{{name}}"><td><span class="mode mode-{{name.lower()}}">{{name.title()}}</span></td><td class="num wide">{{number(numbers['calculation_count'])}}</td><td class="num">{{kg(numbers['activity']['value'])}} tkm</td><td class="num" data-value="{{plain(numbers['emissions']['value'])}}">{{unit.number(numbers['emissions']['value'])}}</td></tr>
%   end
%   if hubs:
      <tr data-mode="HUB"><td>Hubs (shipments)</td><td class="num wide">{{number(hubs['count'])}}</td><td class="num">{{kg(hubs['activity']['value'])}} t handled</td><td class="num" data-value="{{plain(hubs['emissions']['value'])}}">{{unit.number(hubs['emissions']['value'])}}</td></tr>
%   end
    </tbody></table></div>
  <h2 class="subhead" id="context-title">By business context</h2>
%   unit = co2e_unit(*[numbers['emissions']['value'] for numbers in analytics['by_business_context'].values()])
  <div class="tablewrap"><table id="by-context" aria-labelledby="context-title">
    <thead><tr><th scope="col">Context</th><th scope="col" class="num wide">Calculations</th><th scope="col" class="num">Activity</th><th scope="col" class="num">Emissions <span class="unit">{{unit.name}}</span></th></tr></thead>
    <tbody>
%   for name, numbers in analytics['by_business_context'].items():
      <tr data-context="{{name}}"><td>{{name.title()}}</td><td class="num wide">{{number(numbers['calculation_count'])}}</td><td class="num">{{kg(numbers['activity']['value'])}} tkm</td><td class="num" data-value="{{plain(numbers['emissions']['value'])}}">{{unit.number(numbers['emissions']['value'])}}</td></tr>
%   end
    </tbody></table></div>
% else:
  <p class="muted">No calculations in this period.</p>
% end
  <details><summary>The API's answer</summary><p class="muted small"><code>GET {{api_path}}</code></p><pre class="code" tabindex="0">{{api_json}}</pre></details>
</section>
<section class="panel side" aria-labelledby="edit-title">
  <div class="panelhead"><h2 id="edit-title">Details</h2></div>
  <form method="post" action="{{customer_path(customer['reference'])}}/change" class="stack">
    <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="edit">
    <label for="e-name">Name</label><input id="e-name" name="name" required maxlength="200" value="{{form.get('name', customer['name'])}}">
    <label for="e-country">Country</label><input id="e-country" name="country" maxlength="2" value="{{form.get('country', customer['country_code'] or '')}}" aria-describedby="e-country-help"><p class="help" id="e-country-help">Two letters; empty clears it.</p>
    <button type="submit" class="primary">Save</button>
  </form>
  <form method="post" action="{{customer_path(customer['reference'])}}/change" class="stack top">
    <input type="hidden" name="csrf" value="{{csrf}}">
% if customer['status'] == 'active':
    <input type="hidden" name="action" value="suspend">
    <p class="muted small">A suspended customer cannot be charged with new calculations (403 CUSTOMER_ACCESS_DENIED).</p>
    <button type="submit" class="danger">Suspend customer</button>
% else:
    <input type="hidden" name="action" value="reactivate">
    <button type="submit">Reactivate customer</button>
% end
  </form>
</section>
</div>
<section class="panel" aria-labelledby="lanes-title">
  <div class="panelhead"><h2 id="lanes-title">Top lanes</h2><p class="muted small">By emissions in this period{{' · the top %d of %d' % (len(lanes), lane_count) if lane_count > len(lanes) else ''}} · a shipment from its first leg's origin to its last leg's destination, its hubs included · <code>GET {{lanes_api_path}}</code></p></div>
% if lanes:
%   unit = co2e_unit(*[lane['emissions']['value'] for lane in lanes])
  <div class="tablewrap"><table id="lanes">
    <thead><tr><th scope="col">From</th><th scope="col">To</th><th scope="col">Modes</th><th scope="col" class="num">Shipments</th><th scope="col" class="num wide">Single calculations</th><th scope="col" class="num">Activity</th><th scope="col" class="num">Emissions <span class="unit">{{unit.name}}</span></th><th scope="col" class="num wide">Intensity</th></tr></thead>
    <tbody>
%   for lane in lanes:
      <tr data-lane="{{lane['origin']['key']}} {{lane['destination']['key']}}">
%     for end in (lane['origin'], lane['destination']):
        <td><bdi>{{end['code'] or end['country'] or 'unknown'}}</bdi>
%       if end['code'] and end['country']:
          <span class="muted small"><bdi>{{end['country']}}</bdi></span>
%       elif end['country']:
          <span class="muted small">(country)</span>
%       end
        </td>
%     end
        <td>
%     for mode in lane['by_mode']:
          <span class="mode mode-{{mode.lower()}}">{{mode.title()}}</span>
%     end
          {{'+ hubs' if lane.get('hubs') else ''}}</td>
        <td class="num">{{number(lane['shipment_count'])}}</td><td class="num wide">{{number(lane['calculation_count'])}}</td><td class="num">{{kg(lane['activity']['value'])}} tkm</td><td class="num" data-value="{{plain(lane['emissions']['value'])}}">{{unit.number(lane['emissions']['value'])}}</td><td class="num wide">{{kg(lane['intensity']['value'])}} gCO2e/tkm</td></tr>
%   end
    </tbody></table></div>
% else:
  <p class="muted">No lanes in this period.</p>
% end
</section>
<section class="panel" aria-labelledby="recent-title">
  <div class="panelhead"><h2 id="recent-title">Recent calculations</h2><a class="small" href="/workspace/calculations?customer={{customer['reference']}}">View all</a></div>
% if recent:
%   unit = co2e_unit(*[row.emissions_kg for row in recent])
  <div class="tablewrap"><table id="recent"><thead><tr><th scope="col">Reference</th><th scope="col">Mode</th><th scope="col" class="num">Emissions <span class="unit">{{unit.name}}</span></th><th scope="col" class="wide">Created</th></tr></thead><tbody>
%   for row in recent:
    <tr><td><a href="/workspace/calculations/{{row.id}}"><bdi>{{row.external_reference}}</bdi></a></td><td><span class="mode mode-{{row.mode.lower()}}">{{row.mode.title()}}</span></td><td class="num">{{unit.number(row.emissions_kg)}}</td><td class="nowrap wide">{{when(row.created_at)}}</td></tr>
%   end
  </tbody></table></div>
% else:
  <p class="muted">None yet.</p>
% end
</section>
