% rebase('layout')
<div class="pagehead">
  <h1>Shipments</h1>
  <p class="muted">Transport chains of legs and hubs, newest first · {{environment}} environment</p>
</div>
<section class="panel">
% if shipments:
  <div class="tablewrap"><table id="shipments">
    <thead><tr><th scope="col">Shipment</th><th scope="col">Customer</th><th scope="col">Chain</th><th scope="col" class="num">tkm</th><th scope="col" class="num">kgCO2e</th><th scope="col">Activity date</th></tr></thead>
    <tbody>
%   for shipment in shipments:
      <tr><td><a href="/workspace/shipments/{{shipment['id']}}"><bdi>{{shipment['external_reference']}}</bdi></a><div class="muted small mono">{{shipment['id'][:8]}}…</div></td>
      <td>{{shipment['customer']['reference']}}</td>
      <td>{{' → '.join(element['mode'].title() if element['type'] == 'leg' else 'Hub' for element in shipment['elements'])}}</td>
      <td class="num">{{kg(shipment['totals']['activity']['value'])}}</td><td class="num">{{kg(shipment['totals']['emissions']['value'])}}</td>
      <td class="nowrap">{{shipment['activity_date']}}</td></tr>
%   end
    </tbody></table></div>
% else:
  <div class="empty"><p>No shipments yet. <code>POST /v1/shipments</code> makes one.</p></div>
% end
</section>
