% rebase('layout')
<div class="pagehead">
  <h1>Calculations</h1>
  <p class="muted">Newest first · {{environment}} environment</p>
</div>
<form class="filters" method="get" action="/workspace/calculations" aria-label="Filter calculations">
  <div class="field"><label for="f-customer">Customer reference</label><input id="f-customer" name="customer" value="{{filters.customer}}" maxlength="120" aria-describedby="f-customer-help"><p class="help" id="f-customer-help">The whole reference, as the API has it</p></div>
  <div class="field"><label for="f-mode">Mode</label><select id="f-mode" name="mode"><option value="">Any</option>
% for mode in modes:
    <option value="{{mode}}"{{!' selected' if filters.mode == mode else ''}}>{{mode.title()}}</option>
% end
  </select></div>
  <div class="field"><label for="f-from">Created from</label><input id="f-from" name="from" type="date" value="{{filters.date_from.isoformat() if filters.date_from else ''}}"></div>
  <div class="field"><label for="f-to">Created to</label><input id="f-to" name="to" type="date" value="{{filters.date_to.isoformat() if filters.date_to else ''}}"></div>
  <div class="field"><label for="f-activity-from">Activity from</label><input id="f-activity-from" name="activity_from" type="date" value="{{filters.activity_from.isoformat() if filters.activity_from else ''}}"></div>
  <div class="field"><label for="f-activity-to">Activity to</label><input id="f-activity-to" name="activity_to" type="date" value="{{filters.activity_to.isoformat() if filters.activity_to else ''}}"></div>
  <div class="actions"><button type="submit" class="primary">Filter</button> <a href="/workspace/calculations" class="button">Clear</a> <a href="{{csv_url}}" class="button" download>Download CSV</a></div>
</form>
% for problem in problems:
<p class="alert error" role="alert">{{problem}}</p>
% end
<section class="panel">
% if rows:
  <div class="tablewrap"><table id="calculations">
    <thead><tr><th scope="col">Calculation</th><th scope="col">Customer</th><th scope="col">Mode</th><th scope="col" class="num wide">tkm</th><th scope="col" class="num">kgCO2e</th><th scope="col" class="wide">Activity date</th><th scope="col" class="wide">Created</th></tr></thead>
    <tbody>
%   for row in rows:
      <tr data-mode="{{row.mode}}" data-customer="{{row.customer_reference}}"><td><a href="/workspace/calculations/{{row.id}}"><bdi>{{row.external_reference}}</bdi></a><div class="muted small mono">{{row.id[:8]}}…</div></td>
      <td>{{row.customer_reference}}</td><td><span class="mode mode-{{row.mode.lower()}}">{{row.mode.title()}}</span></td>
      <td class="num wide">{{kg(row.activity_tkm)}}</td><td class="num">{{kg(row.emissions_kg)}}</td>
      <td class="nowrap wide">{{row.activity_date.isoformat()}}</td><td class="nowrap wide">{{when(row.created_at)}}</td></tr>
%   end
    </tbody></table></div>
% else:
  <div class="empty"><p>No calculations match.</p></div>
% end
  <div class="pager">
% if paged:
    <a href="/workspace/calculations{{"?" + query_of(filters) if query_of(filters) else ""}}" class="button">Newest</a>
% end
% if next_url:
    <a href="{{next_url}}" class="button" rel="next">Older</a>
% end
  </div>
</section>
