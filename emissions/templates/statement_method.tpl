% # The method and its sources: the same words in the workspace's printable statement and the CLI's file.
<p>{{method['standard']}}, well-to-wheel ({{method['boundary']}}). {{method['description']}}</p>
% for publication in method['publications']:
<p>Source: {{publication.get('title', '')}}, {{publication.get('publisher', '')}} {{publication.get('year', '')}}.</p>
% end
