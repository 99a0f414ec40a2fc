% rebase('layout')
<p class="crumbs"><a href="/workspace/team">Team</a> / remove</p>
<section class="panel narrow confirm">
  <h1>Remove <bdi>{{user.email}}</bdi>?</h1>
  <p><bdi>{{user.email}}</bdi> can no longer sign in to <bdi>{{session.organization.name}}</bdi>'s workspace, and any session open now ends at once. The API keys the organization has keep working. Their actions stay in the audit log.</p>
  <form method="post" action="/workspace/team/{{user.id}}/remove" class="buttons">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <button type="submit" class="danger">Remove <bdi>{{user.email}}</bdi></button>
    <a href="/workspace/team" class="button">Cancel</a>
  </form>
</section>
