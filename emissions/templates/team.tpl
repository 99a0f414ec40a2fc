% rebase('layout')
<div class="pagehead">
  <h1>Team</h1>
  <p class="muted">Everyone who can sign in to <bdi>{{session.organization.name}}</bdi></p>
</div>
% if error:
<p class="alert error" role="alert">{{error}}</p>
% end
% if notice:
<p class="alert ok" role="status">{{notice}}</p>
% end
<section class="panel">
  <div class="tablewrap"><table id="users">
    <thead><tr><th scope="col">Email</th><th scope="col">Added</th><th scope="col">Last sign-in</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
    <tbody>
% for user in users:
      <tr data-user="{{user.email}}"><td><bdi>{{user.email}}</bdi>{{!' <span class="badge">you</span>' if user.id == session.user.id else ''}}</td><td class="nowrap">{{day(user.created_at)}}</td><td class="nowrap">{{when(user.last_sign_in_at) if user.last_sign_in_at else 'Never'}}</td>
      <td>
%   if user.id != session.user.id:
        <a class="button small danger" href="/workspace/team/{{user.id}}/remove" aria-label="Remove {{user.email}}">Remove</a>
%   end
      </td></tr>
% end
    </tbody></table></div>
</section>
<div class="columns">
<section class="panel grow" aria-labelledby="add-title">
  <div class="panelhead"><h2 id="add-title">Add a teammate</h2></div>
  <form method="post" action="/workspace/team" class="stack">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <label for="t-email">Email</label><input id="t-email" name="email" type="email" required maxlength="254" autocomplete="off" value="{{form.get('email', '')}}">
    <label for="t-password">Initial password</label><input id="t-password" name="password" type="password" required minlength="12" autocomplete="new-password" aria-describedby="t-password-help">
    <p class="help" id="t-password-help">At least 12 characters. Share it safely; they can change it here.</p>
    <button type="submit" class="primary">Add teammate</button>
  </form>
</section>
<section class="panel grow" aria-labelledby="password-title">
  <div class="panelhead"><h2 id="password-title">Change your password</h2></div>
  <form method="post" action="/workspace/password" class="stack">
    <input type="hidden" name="csrf" value="{{csrf}}">
    <input type="hidden" name="username" value="{{session.user.email}}" autocomplete="username">
    <label for="p-current">Current password</label><input id="p-current" name="current_password" type="password" required autocomplete="current-password">
    <label for="p-new">New password</label><input id="p-new" name="new_password" type="password" required minlength="12" autocomplete="new-password" aria-describedby="p-new-help">
    <p class="help" id="p-new-help">At least 12 characters. Your other sessions are signed out.</p>
    <button type="submit" class="primary">Change password</button>
  </form>
</section>
</div>
