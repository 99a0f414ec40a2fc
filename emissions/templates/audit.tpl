% rebase('layout')
<div class="pagehead">
  <h1>Audit log</h1>
  <p class="muted">Administrative actions in <bdi>{{session.organization.name}}</bdi>, newest first</p>
</div>
<section class="panel">
% if events:
  <div class="tablewrap"><table id="audit">
    <thead><tr><th scope="col">Time</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Env</th><th scope="col">Details</th></tr></thead>
    <tbody>
%   for event in events:
      <tr><td class="nowrap">{{when(event.created_at)}}</td><td><bdi>{{event.actor}}</bdi></td><td class="nowrap"><code>{{event.action}}</code></td><td class="mono small break"><bdi>{{event.target}}</bdi></td><td>{{event.environment or '—'}}</td><td class="small break"><bdi>{{event.details or ''}}</bdi></td></tr>
%   end
    </tbody></table></div>
% else:
  <div class="empty"><p>Nothing recorded yet.</p></div>
% end
</section>
