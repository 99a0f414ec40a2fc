<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{!policy}}">
% customer, period, method = statement['customer'], statement['period'], statement['methodology']
<title>Emissions statement: {{customer['name']}}</title>
<style>{{!style}}</style></head><body>
<h1>Emissions statement: <bdi>{{customer['name']}}</bdi> (<bdi>{{customer['reference']}}</bdi>)</h1>
<p>Period: {{period['from'] or 'start'}} to {{period['to'] or 'today'}} (by activity date; {{statement['environment']}} environment). Generated {{statement['generated_at']}}.</p>
<h2>Totals</h2>
% include('statement_table.tpl', table=tables['totals'])
<p>Intensity: {{intensity}} kgCO2e/tkm</p>
% include('statement_table.tpl', table=tables['counts'])
<p>Calculations count each leg of a shipment and each single calculation; a hub is no calculation, its emissions are in its own row. TTW, WTT and not split (emissions whose factor gives only the well-to-wheel total) add up to kgCO2e.</p>
<h2>By mode</h2>
% include('statement_table.tpl', table=tables['modes'])
<h2>By month</h2>
% include('statement_table.tpl', table=tables['months'])
<h2>Factors used</h2>
% include('statement_table.tpl', table=tables['factors'])
% include('statement_voided.tpl', voided=statement.get('voided'), amount=exact)
<h2>Method</h2>
% include('statement_method.tpl', method=method)
</body></html>
