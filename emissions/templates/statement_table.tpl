% # <bdi>: stored text cannot reorder what is beside it; an emissions cell carries its exact kg in data-value.
<table><thead><tr>\\
% for header in table.headers:
<th>{{header}}</th>\\
% end
</tr></thead><tbody>\\
% for row in table.rows:
<tr>\\
%   for cell in row:
%     if cell.exact is None:
<td><bdi>{{cell.text}}</bdi></td>\\
%     else:
<td data-value="{{cell.exact}}"><bdi>{{cell.text}}</bdi></td>\\
%     end
%   end
</tr>\\
% end
</tbody></table>
