% rebase('layout')
<p class="crumbs"><a href="/workspace/shipments">Shipments</a> / <span class="mono">{{shipment['id']}}</span></p>
<div class="pagehead">
  <h1><bdi>{{shipment['external_reference']}}</bdi></h1>
  <p class="muted">{{shipment['customer']['reference']}} · {{len(shipment['elements'])}} elements · {{shipment['cargo']['tonnes']}} t · activity date {{shipment['activity_date']}}</p>
</div>
<section class="cards" id="totals">
  <div class="card"><h2 class="label">Emissions</h2><p class="figure" data-value="{{plain(shipment['totals']['emissions']['value'])}}">{{unit.text(shipment['totals']['emissions']['value'])}}</p>
    <p class="muted small">TTW {{unit.text(shipment['totals']['emissions']['breakdown']['ttw'])}} · WTT {{unit.text(shipment['totals']['emissions']['breakdown']['wtt'])}}</p></div>
  <div class="card"><h2 class="label">Activity</h2><p class="figure">{{kg(shipment['totals']['activity']['value'])}} <span class="unit">tkm</span></p></div>
  <div class="card"><h2 class="label">Intensity</h2><p class="figure">{{shipment['totals']['intensity']['value']}} <span class="unit">kgCO2e/tkm</span></p></div>
</section>
<div class="columns">
<section class="panel grow" aria-labelledby="chain-title">
  <div class="panelhead"><h2 id="chain-title">Chain</h2></div>
  <div class="chainframe">{{!svg}}</div>
</section>
<section class="panel side" aria-labelledby="bars-title">
  <div class="panelhead"><h2 id="bars-title">Emissions per element</h2><p class="muted small">{{unit.name}}</p></div>
  <ol class="elementbars" id="bars">
% for bar in bars:
    <li data-index="{{bar['index']}}"><span class="barlabel"><bdi>{{bar['label']}}</bdi></span> <span class="num">{{unit.number(bar['kg'])}}</span>
      <svg class="bar" viewBox="0 0 100 8" preserveAspectRatio="none" aria-hidden="true"><rect class="track" width="100" height="8"/><rect class="fill" width="{{'%.2f' % bar['width']}}" height="8"/></svg></li>
% end
  </ol>
</section>
</div>
<section class="panel" aria-labelledby="body-title">
  <div class="panelhead"><h2 id="body-title">Stored response</h2><p class="muted small">Exactly what <code>GET /v1/shipments/{{shipment['id']}}</code> answers</p></div>
  <pre class="code" tabindex="0">{{pretty}}</pre>
</section>
