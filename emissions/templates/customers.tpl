% rebase('layout')
<div class="pagehead">
  <h1>Customers</h1>
  <p class="muted">{{environment.capitalize()}} environment · the accounts your calculations are charged to</p>
</div>
% if error:
<p class="alert error" role="alert">{{error}}</p>
% end
<section class="panel">
% if customers:
  <div class="tablewrap"><table>
    <thead><tr><th scope="col">Customer</th><th scope="col">Country</th><th scope="col">Status</th><th scope="col" class="num">Calculations</th><th scope="col" class="num">kgCO2e</th></tr></thead>
    <tbody>
%   for customer in customers:
%     total = totals.get(customer.id, {'count': 0, 'kg': 0})
      <tr><td><a href="{{customer_path(customer.reference)}}"><bdi>{{customer.name}}</bdi></a><div class="muted small mono">{{customer.reference}}</div></td>
      <td>{{customer.country_code or '—'}}</td><td><span class="badge {{status_class(customer.status)}}">{{customer.status}}</span></td>
      <td class="num">{{number(total['count'])}}</td><td class="num">{{kg(total['kg'])}}</td></tr>
%   end
    </tbody></table></div>
% else:
  <div class="empty"><p>No customers in the {{environment}} environment yet.</p></div>
% end
% if paged or next_url:
  <div class="pager">
%   if paged:
    <a href="/workspace/customers" class="button">First</a>
%   end
%   if next_url:
    <a href="{{next_url}}" class="button" rel="next">Next</a>
%   end
  </div>
% end
</section>
<section class="panel narrow" aria-labelledby="add-title">
  <div class="panelhead"><h2 id="add-title">Add a customer</h2></div>
  <form method="post" action="/workspace/customers" class="grid2">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <div class="field"><label for="c-reference">Reference</label><input id="c-reference" name="reference" required maxlength="120" value="{{form.get('reference', '')}}" aria-describedby="c-reference-help"><p class="help" id="c-reference-help">Your own id for them, used in API calls.</p></div>
    <div class="field"><label for="c-name">Name</label><input id="c-name" name="name" required maxlength="200" value="{{form.get('name', '')}}"></div>
    <div class="field"><label for="c-country">Country (optional)</label><input id="c-country" name="country" maxlength="2" value="{{form.get('country', '')}}" aria-describedby="c-country-help"><p class="help" id="c-country-help">Two letters, e.g. GB</p></div>
    <div class="actions"><button type="submit" class="primary">Add customer</button></div>
  </form>
</section>
