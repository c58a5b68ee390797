// The skeleton of one training job (tenant): its pairs, its loss and RTT,
// and the ToRs and components it runs on.
local g = import '../lib/grafana.libsonnet';

function(c)
  local common = (import 'common.libsonnet')(c);
  local v = common.variables;
  local l = c.labels;
  local cl = common.cluster;
  local tenantProto = cl + ', ' + g.match('tenant') + ', ' + g.match('protocol');
  // Pairs with both ends in the tenant.
  local pairs = cl + ', ' + g.match('src_tenant', 'tenant') + ', ' + g.match('dst_tenant', 'tenant') + ', ' + g.match('protocol');
  local nodes = 'skeletonhunter_node_info{%s}' % common.nodeInfo;
  local loss = g.lossThresholds(c.lossSteps);
  local count = g.thresholds('blue');
  local n = c.pairPanelLimit;
  local top(x, title, expr, thresholds, unit=null, description='') =
    g.stat(title, g.pos(x, 1, 6, 4), g.instant(expr), thresholds, unit, description);
  // The ids of the job's components of `kind`, as {kind, id} series.
  local componentsOf(kind) =
    'label_replace(label_replace(count by (%(l)s) (%(nodes)s), "id", "$1", "%(l)s", "(.*)"), "kind", "%(k)s", "", "")'
    % { l: l[kind], k: kind, nodes: nodes };

  g.dashboard(
    c,
    'tenant',
    'Tenant (job) view',
    'The skeleton of one training job: its pairs, its loss and RTT, and the ToRs it runs under.',
    ['network', 'tenant'],
    [v.cluster, v.job, v.tenant(all=false), v.protocol],
    [
      g.row('Job $tenant', 0),
      top(0, 'Loss', 'sum(tenant:skeletonhunter_probe_lost:rate1m{%s}) / sum(tenant:skeletonhunter_probe_sent:rate1m{%s})' % [tenantProto, tenantProto],
          loss, 'percentunit', 'Over the pairs with both ends in the job.'),
      top(6, 'Nodes (ranks)', 'count(%s)' % nodes, count, 'short', "The job's nodes (training containers) with an exporter identity."),
      top(12, 'Skeleton pairs', 'count(count by (src_node, dst_node) (topology:skeletonhunter_probe_sent:rate1m{%s}))' % pairs, count,
          'short', 'Pairs with both ends in the job that sent probes in the last minute.'),
      top(18, 'Unreachable pairs', 'sum(tenant:skeletonhunter_probe_unreachable_pairs:count{%s, %s}) or vector(0)' % [cl, g.match('tenant')],
          g.thresholds('green', [['red', 1]]), 'short', "Pairs of the job losing every probe: the job's collective operations stall."),
      g.timeseries('Loss over time', g.pos(0, 5, 12, 8),
                   [g.target('tenant:skeletonhunter_probe_loss:ratio_rate1m{%s}' % tenantProto, '{{protocol}}')], 'percentunit',
                   'Probes lost / sent over the pairs with both ends in the job, by protocol.'),
      g.timeseries('RTT percentiles', g.pos(12, 5, 12, 8), [
        g.target('tenant:skeletonhunter_probe_rtt_seconds:%s_rate1m{%s}' % [p, tenantProto], p + ' {{protocol}}')
        for p in ['p50', 'p99']
      ], 's', "Median and 99th percentile probe RTT over the job's pairs, by protocol."),
      g.table(
        'Pair loss matrix (src × dst)', g.pos(0, 13, 12, 12),
        [g.tableTarget(g.topk(n, 'max by (src_node, dst_node) (topology:skeletonhunter_probe_loss:ratio_rate1m{%s})' % pairs))], [g.pairMatrix],
        "Loss ratio of the job's %d lossiest pairs: rows are sources, columns destinations." % n,
        defaults={ unit: 'percentunit', thresholds: loss, custom: { cellOptions: { type: 'color-background' }, align: 'center' } },
      ),
      g.timeseries('Pair RTT p99', g.pos(12, 13, 12, 12), [g.target(
        g.topk(n, 'max by (src_node, dst_node) (topology:skeletonhunter_probe_rtt_seconds:p99_rate1m{%s})' % pairs), '{{src_node}} → {{dst_node}}'
      )], 's', "99th percentile RTT of the job's %d slowest pairs at each moment." % n),

      g.row('Where the job runs', 25),
      // `tor` of the aggregate joined with the ToR label of the job's nodes.
      g.timeseries('Loss of the ToRs the job uses', g.pos(0, 26, 12, 8), [g.target(
        'max by (tor) (tor:skeletonhunter_probe_loss:ratio_rate1m{%s, %s}) and on (tor) count by (tor) (%s)' % [cl, g.match('protocol'), nodes], '{{tor}}'
      )], 'percentunit', "All traffic through those ToRs, not only this job's: another job's fault shows here too."),
      g.timeseries('Blame of the components the job uses', g.pos(12, 26, 12, 8), [g.target(
        'max by (kind, id) (skeletonhunter_component_blame{%s}) and on (kind, id) (%s)'
        % [cl, std.join(' or ', [componentsOf(k) for k in ['node', 'nic', 'host', 'tor', 'spine']])],
        '{{kind}} {{id}}'
      )], 'percentunit', "The localizer's blame for the containers, NICs, hosts, ToRs and spines under the job's nodes.", defaults={ min: 0, max: 1 }),
      g.table('Nodes', g.pos(0, 34, 24, 8),
              [g.tableTarget('max by (%s, %s, %s, %s, %s, %s) (%s)' % [l.node, l.nic, l.host, l.tor, l.spine, l.pod, nodes])],
              [g.hide(['Time', 'Value'])],
              "The job's nodes and where each sits: NIC, host, ToR, spine, network pod.",
              defaults={ unit: 'none' }),
      g.table(
        'Alerting components hurting the job', g.pos(0, 42, 24, 6),
        [g.tableTarget('max by (component, scope) (label_join(skeletonhunter_localizer_job_impact_ranks{%s, %s}, "component", " ", "kind", "id"))'
                       % [cl, g.match('tenant')])],
        [{ id: 'groupingToMatrix', options: { rowField: 'component', columnField: 'scope', valueField: 'Value', emptyValue: 'null' } }],
        "Each component the localizer alerts on that touches the job, with the job's ranks placed beneath it (under), whose skeleton pairs cross it (hit), and all its ranks (all). Empty while nothing that touches the job is alerting.",
        defaults={ unit: 'short' },
      ),
    ],
  )
