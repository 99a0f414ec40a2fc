<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}} · {{organization.name}}</title>
<link rel="stylesheet" href="/workspace/static/workspace.css"><link rel="icon" href="/workspace/static/icon.svg">
</head>
<body class="statement">
% customer, totals = statement['customer'], statement['totals']
<p class="noprint"><a href="{{back}}">← Back to the customer</a> · use your browser's Print to save it as PDF (A4).</p>
<header class="statementhead">
  <p class="org"><bdi>{{organization.name}}</bdi></p>
  <h1>Emissions statement</h1>
  <dl class="facts">
    <dt>Customer</dt><dd id="statement-customer"><bdi>{{customer['name']}}</bdi> ({{customer['reference']}}){{', ' + customer['country_code'] if customer['country_code'] else ''}}</dd>
    <dt>Period</dt><dd id="statement-period">Activity dates {{period.label}}</dd>
    <dt>Environment</dt><dd>{{statement['environment']}}</dd>
    <dt>Generated</dt><dd>{{statement['generated_at']}}</dd>
  </dl>
</header>
% hubs = statement.get('hubs')
% # A hub has no calculation and no tkm: its row leaves them out, so that each column adds up to the total.
% hubs_rows = [('Hubs ({}, {} t handled)'.format(number(hubs['count']), kg(hubs['activity']['value'])), {'calculation_count': None, 'activity': {'value': None}, 'emissions': hubs['emissions']})] if hubs else []
% tables = (('totals', 'Totals', '', [('Total', totals)]), ('modes', 'By mode', 'Mode', [(mode.title(), numbers) for mode, numbers in statement['by_mode'].items()] + hubs_rows), ('months', 'By month', 'Month', [(month['month'], month) for month in statement['by_month']]))
% for key, heading, first, rows in tables:
%   unit = co2e_unit(*[numbers['emissions']['value'] for _, numbers in rows])
%   columns = ('Calculations', 'Activity (tkm)') + tuple(f'{name} ({unit.name})' for name in ('Emissions', 'TTW', 'WTT', 'Not split'))
<section aria-labelledby="{{key}}-title">
  <h2 id="{{key}}-title">{{heading}}</h2>
  <table id="statement-{{key}}"><thead><tr><th scope="col">{{first}}</th>
%   for column in columns:
  <th scope="col" class="num">{{column}}</th>
%   end
  </tr></thead><tbody>
%   for label, numbers in rows:
%     breakdown = numbers['emissions'].get('breakdown') or {}
  <tr><th scope="row">{{label}}</th><td class="num">{{number(numbers['calculation_count'])}}</td><td class="num">{{kg(numbers['activity']['value'])}}</td><td class="num" data-value="{{plain(numbers['emissions']['value'])}}">{{unit.number(numbers['emissions']['value'])}}</td><td class="num">{{unit.number(breakdown['ttw']) if breakdown else '—'}}</td><td class="num">{{unit.number(breakdown['wtt']) if breakdown else '—'}}</td><td class="num">{{unit.number(breakdown['unattributed']) if breakdown else '—'}}</td></tr>
%   end
  </tbody></table>
%   if key == 'totals':
  <p>Intensity: {{'—' if totals['intensity']['value'] is None else plain(totals['intensity']['value'])}} kgCO2e/tkm</p>
  <p id="statement-counts">Shipments <span data-field="shipment_count">{{number(totals['shipment_count'])}}</span> · single calculations <span data-field="single_calculation_count">{{number(totals['single_calculation_count'])}}</span> · hubs <span data-field="hub_count">{{number(hubs['count'] if hubs else 0)}}</span>. Calculations count each leg of a shipment and each single calculation.</p>
%   end
</section>
% end
<section aria-labelledby="factors-title">
  <h2 id="factors-title">Emission factors used</h2>
  <table id="statement-factors"><thead><tr><th scope="col">Factor</th><th scope="col">Version</th><th scope="col">Name</th><th scope="col">Source</th><th scope="col" class="num">Calculations</th><th scope="col" class="num">Hubs</th></tr></thead><tbody>
% for factor in statement['factors']:
  <tr><td class="break"><bdi>{{factor['reference']}}</bdi></td><td>{{factor['version']}}</td><td><bdi>{{factor.get('name', '')}}</bdi></td><td class="break"><bdi>{{factor.get('source', '')}}</bdi></td><td class="num">{{number(factor['calculation_count']) if factor['calculation_count'] or 'hub_count' not in factor else '—'}}</td><td class="num">{{number(factor.get('hub_count'))}}</td></tr>
% end
  </tbody></table>
</section>
% include('statement_voided.tpl', voided=statement.get('voided'), amount=plain)
<section aria-labelledby="method-title">
  <h2 id="method-title">Method and sources</h2>
% method = statement['methodology']
% include('statement_method.tpl', method=method)
  <p class="small">TTW (tank-to-wheel) and WTT (well-to-tank) are the parts of the calculations whose factor gives them; "not split" is the emissions of calculations whose factor gives only the well-to-wheel total. Each table gives its emissions in one unit, named in its header: tonnes (t CO2e) where its largest value is 1,000 kg or more, else kgCO2e; the exact values, to 6 decimal places, are in the CSV and the API.</p>
</section>
</body>
</html>
