// The skeleton of one training job (tenant): its pairs, its loss and RTT,
// and the ToRs and components it runs on.
local g = import '../lib/grafana.libsonnet';

function(c)
  local common = (import 'common.libsonnet')(c);
  local v = common.variables;
  local l = c.labels;
  local cl = common.cluster;
  // The tenant's area of the localizer's overview (pairs with both ends in it).
  local job = '%s, scope="tenant", %s' % [cl, g.match('id', 'tenant')];
  // The job's worst pairs.
  local pairs = cl + ', ' + g.match('tenant');
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
    [v.cluster, v.job, v.tenant(all=false)],
    [
      g.row('Job $tenant', 0),
      top(0, 'Loss', 'max(skeletonhunter_overview_loss_ratio{%s})' % job,
          loss, 'percentunit', "Over the pairs with both ends in the job, over the localizer's window."),
      top(6, 'Nodes (ranks)', 'count(%s)' % nodes, count, 'short', "The job's nodes (training containers) with an exporter identity."),
      top(12, 'Skeleton pairs', 'max(skeletonhunter_overview_pairs{%s, state="all"})' % job, count,
          'short', "Pairs with both ends in the job in the localizer's last cycle."),
      top(18, 'Unreachable pairs', 'max(skeletonhunter_overview_pairs{%s, state="unreachable"}) or vector(0)' % job,
          g.thresholds('green', [['red', 1]]), 'short', "Pairs of the job losing at least 95 % of their probes: the job's collective operations stall."),
      g.timeseries('Loss over time', g.pos(0, 5, 12, 8),
                   [g.target('max(skeletonhunter_overview_loss_ratio{%s})' % job, 'loss')], 'percentunit',
                   'Probes lost / sent over the pairs with both ends in the job.'),
      g.timeseries('Pair RTT', g.pos(12, 5, 12, 8), [
        g.target('max by (quantile) (skeletonhunter_overview_pair_rtt_seconds{%s})' % job, 'quantile {{quantile}}'),
      ], 's', "Median and 99th percentile of the median RTT of the job's pairs."),
      g.table(
        'Pair loss matrix (src × dst)', g.pos(0, 13, 12, 12),
        [g.tableTarget(g.topk(n, 'max by (src_node, dst_node) (skeletonhunter_overview_worst_pair_loss_ratio{%s})' % pairs))], [g.pairMatrix],
        "Loss ratio of the job's lossiest pairs (the localizer keeps at least 5 lossy and 5 slow pairs per job, %d at most here): rows are sources, columns destinations." % n,
        defaults={ unit: 'percentunit', thresholds: loss, custom: { cellOptions: { type: 'color-background' }, align: 'center' } },
      ),
      g.timeseries('Slowest pairs', g.pos(12, 13, 12, 12), [g.target(
        g.topk(n, 'max by (src_node, dst_node) (skeletonhunter_overview_worst_pair_rtt_seconds{%s})' % pairs), '{{src_node}} → {{dst_node}}'
      )], 's', "Median RTT of the job's slowest (and lossiest) pairs at each moment."),

      g.row('Where the job runs', 25),
      // The ToR areas kept where the job's nodes carry the ToR label.
      g.timeseries('Loss of the ToRs the job uses', g.pos(0, 26, 12, 8), [g.target(
        'max by (id) (skeletonhunter_overview_loss_ratio{%s, scope="tor"}) and on (id) label_replace(count by (%s) (%s), "id", "$1", "%s", "(.*)")'
        % [cl, l.tor, nodes, l.tor], '{{id}}'
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
