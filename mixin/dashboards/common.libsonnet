// What the three dashboards share: the template variables (cluster is
// optional, All = .*; job filters the raw exporter series only) and the
// selectors built on them.
local g = import '../lib/grafana.libsonnet';

function(c) {
  local l = c.labels,
  // Every query filters on the cluster; series straight from the exporters
  // on the job too (recordings aggregate the job away).
  cluster: g.match('cluster'),
  exporters: self.cluster + ', ' + g.match('job'),
  nodeInfo: self.exporters + ', ' + g.match(l.tenant, 'tenant'),

  variables: {
    cluster: g.variable('cluster', 'Cluster', 'label_values(skeletonhunter_build_info, cluster)'),
    job: g.variable('job', 'Exporter job', 'label_values(skeletonhunter_node_info{%s}, job)' % g.match('cluster'), allValue=null),
    tenant(all=true): g.variable(
      'tenant', 'Tenant', 'label_values(skeletonhunter_node_info{%s}, %s)' % [$.exporters, l.tenant], all=all,
    ),
    tor: g.variable('tor', 'ToR', 'label_values(skeletonhunter_node_info{%s}, %s)' % [$.nodeInfo, l.tor]),
    instance: g.variable('instance', 'Exporter', 'label_values(up{%s}, instance)' % $.exporters),
  },
}
