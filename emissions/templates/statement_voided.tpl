% # The period's voided records, apart from every total: the same words in the workspace's printable
% # statement and the CLI's file. `amount` writes a kg value exactly (the JSON's decimal text).
% if voided:
<section aria-labelledby="voided-title">
  <h2 id="voided-title">Voided, not counted</h2>
  <p>These records were voided after they were calculated: they stay on record, but count in no total, mode, month or factor of this statement.</p>
  <table id="statement-voided"><thead><tr><th scope="col">Record</th><th scope="col">Reference</th><th scope="col">Activity date</th><th scope="col" class="num">kgCO2e</th><th scope="col">Voided</th><th scope="col">Reason</th></tr></thead><tbody>
%   for record in voided:
  <tr><td>{{record['object']}}</td><td class="break"><bdi>{{record['external_reference']}}</bdi></td><td>{{record['activity_date']}}</td><td class="num">{{amount(record['emissions']['value'])}}</td><td>{{record['voided_at'][:10]}}</td><td class="break"><bdi>{{record['reason']}}</bdi></td></tr>
%   end
  </tbody></table>
</section>
% end
