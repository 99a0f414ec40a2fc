% rebase('layout')
<p class="crumbs"><a href="/workspace/customers">Customers</a> / <span class="mono">{{customer['reference']}}</span></p>
<div class="pagehead">
  <h1>{{customer['name']}} <span class="badge {{status_class(customer['status'])}}">{{customer['status']}}</span></h1>
  <p class="muted">{{customer['reference']}} · {{customer['country_code'] or 'no country'}} · {{environment}} environment</p>
</div>
% if error:
<p class="alert error" role="alert">{{error}}</p>
% end
<section class="cards" aria-label="Analytics" id="analytics">
  <div class="card"><h2 class="label">Calculations</h2><p class="figure" data-field="calculation_count">{{number(analytics['calculation_count'])}}</p></div>
  <div class="card"><h2 class="label">Emissions</h2><p class="figure"><span data-field="emissions">{{plain(analytics['emissions']['value'])}}</span> <span class="unit">kgCO2e</span></p></div>
  <div class="card"><h2 class="label">Activity</h2><p class="figure"><span data-field="activity">{{plain(analytics['activity']['value'])}}</span> <span class="unit">tkm</span></p></div>
  <div class="card"><h2 class="label">Activity dates</h2><p>{{analytics['first_activity_date'] or '—'}} → {{analytics['last_activity_date'] or '—'}}</p></div>
</section>
<div class="columns">
<section class="panel grow" aria-labelledby="split-title">
  <div class="panelhead"><h2 id="split-title">By mode and business context</h2></div>
% if analytics['by_mode']:
  <div class="tablewrap"><table>
    <thead><tr><th scope="col">Split</th><th scope="col" class="num">Calculations</th><th scope="col" class="num">tkm</th><th scope="col" class="num">kgCO2e</th></tr></thead>
    <tbody>
%   for group in ('by_mode', 'by_business_context'):
%     for name, numbers in analytics[group].items():
      <tr><td>{{name}}</td><td class="num">{{number(numbers['calculation_count'])}}</td><td class="num">{{plain(numbers['activity']['value'])}}</td><td class="num">{{plain(numbers['emissions']['value'])}}</td></tr>
%     end
%   end
    </tbody></table></div>
% else:
  <p class="muted">No calculations yet.</p>
% end
  <details><summary>The API's answer</summary><p class="muted small"><code>GET /v1/customers/{{customer['reference']}}/emissions</code></p><pre class="code" tabindex="0">{{api_json}}</pre></details>
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
<section class="panel" aria-labelledby="recent-title">
  <div class="panelhead"><h2 id="recent-title">Recent calculations</h2><a class="small" href="/workspace/calculations?customer={{customer['reference']}}">View all</a></div>
% if recent:
  <div class="tablewrap"><table><tbody>
%   for row in recent:
    <tr><td><a href="/workspace/calculations/{{row.id}}">{{row.external_reference}}</a></td><td><span class="mode mode-{{row.mode.lower()}}">{{row.mode.title()}}</span></td><td class="num">{{kg(row.emissions_kg)}} kgCO2e</td><td class="nowrap">{{when(row.created_at)}}</td></tr>
%   end
  </tbody></table></div>
% else:
  <p class="muted">None yet.</p>
% end
</section>
