// The fabric overview: loss and RTT across all skeleton pairs, per ToR and
// spine, and what the localizer blames. Alerts about pairs and components
// link here (with var-tor set to the pair's source ToR).
local g = import '../lib/grafana.libsonnet';

function(c)
  local common = (import 'common.libsonnet')(c);
  local v = common.variables;
  local cl = common.cluster;
  local proto = cl + ', ' + g.match('protocol');
  local torProto = cl + ', ' + g.match('tor') + ', ' + g.match('protocol');
  // Pairs whose source is under the chosen tenants and ToRs.
  local pairs = cl + ', ' + g.match('src_tenant', 'tenant') + ', ' + g.match('src_tor', 'tor') + ', ' + g.match('protocol');
  local n = c.pairPanelLimit;
  local pairLoss = g.topk(n, 'max by (src_node, dst_node) (topology:skeletonhunter_probe_loss:ratio_rate1m{%s})' % pairs);
  local loss = g.lossThresholds(c.lossSteps);
  local alarm = g.thresholds('green', [['red', 1]]);
  local count = g.thresholds('blue');
  local blame = 'max by (kind, id) (skeletonhunter_component_blame{%s})' % cl;
  local top(x, title, expr, thresholds, description, unit=null) =
    g.stat(title, g.pos(x, 1, 4, 4), g.instant(expr), thresholds, unit, description);

  g.dashboard(
    c,
    'fabric',
    'Fabric overview',
    'Skeleton probe loss and RTT across the fabric, and which components the localizer blames.',
    ['network'],
    [v.cluster, v.job, v.tenant(), v.tor, v.protocol],
    [
      g.row('Now', 0),
      top(0, 'Fabric loss', 'fabric:skeletonhunter_probe_loss:ratio_rate1m{%s}' % cl, loss,
          'Probes lost / probes sent over the last minute, all skeleton pairs.', 'percentunit'),
      top(4, 'Skeleton pairs probed', 'fabric:skeletonhunter_probe_pairs:count{%s}' % cl, count,
          'Distinct src -> dst pairs with probes in the last minute.', 'short'),
      top(8, 'Unreachable pairs', 'fabric:skeletonhunter_probe_unreachable_pairs:count{%s}' % cl, alarm,
          'Pairs losing every probe (or every TCP dial) over the last minute.', 'short'),
      top(12, 'Components blamed', 'count(skeletonhunter_component_faulty{%s} == 1) or vector(0)' % cl, alarm,
          'Components the localizer currently marks faulty.', 'short'),
      top(16, 'Exporters up', 'sum(up{%s})' % common.exporters, count,
          'Exporters Prometheus scrapes successfully.', 'short'),
      top(20, 'Localizer healthy', 'time() - max(skeletonhunter_localizer_last_success_timestamp_seconds{%s})' % cl,
          g.thresholds('green', [['red', c.localizerStaleSeconds]]),
          'Seconds since the localizer last finished a cycle.', 's'),

      g.row('Skeleton loss', 5),
      g.table(
        'Skeleton loss matrix (src × dst, last minute)', g.pos(0, 6, 12, 12), [g.tableTarget(pairLoss)], [g.pairMatrix],
        'Loss ratio of the %d lossiest skeleton pairs (a large fleet has more pairs than a table can show): rows are sources, columns destinations; empty cells are pairs not among them or not in the skeleton. A row or column lighting up points at one endpoint; a block at a ToR.' % n,
        { unit: 'percentunit', thresholds: loss, custom: { cellOptions: { type: 'color-background' }, align: 'center' } },
      ),
      g.panel(
        'status-history', 'Pair loss over time (heatmap)', g.pos(12, 6, 12, 12),
        [g.target(pairLoss, '{{src_node}} → {{dst_node}}')],
        'One row per skeleton pair among the %d lossiest at each moment, coloured by loss ratio.' % n,
        defaults={ unit: 'percentunit', thresholds: loss },
        options={ showValue: 'never', rowHeight: 0.9, colWidth: 0.9, legend: { showLegend: false } },
      ),
      g.timeseries('Loss per ToR', g.pos(0, 18, 8, 8),
                   [g.target('tor:skeletonhunter_probe_loss:ratio_rate1m{%s}' % torProto, '{{tor}} {{protocol}}')],
                   'percentunit', 'Pairs with an endpoint under the ToR.'),
      g.timeseries('Loss per spine', g.pos(8, 18, 8, 8),
                   [g.target('spine:skeletonhunter_probe_loss:ratio_rate1m{%s}' % proto, '{{spine}} {{protocol}}')],
                   'percentunit', 'Pairs between ToRs with an endpoint under the spine.'),
      g.table(
        'Worst pairs', g.pos(16, 18, 8, 8),
        [g.tableTarget(g.topk(20, 'max by (src_node, dst_node, src_tor, dst_tor, protocol) (topology:skeletonhunter_probe_loss:ratio_rate1m{%s})' % pairs))],
        [g.hide(['Time']), { id: 'sortBy', options: { sort: [{ field: 'Value', desc: true }] } }],
        'The 20 lossiest skeleton pairs now.',
        { unit: 'percentunit', thresholds: loss, custom: { cellOptions: { type: 'color-text' } } },
      ),

      g.row('RTT', 26),
      g.timeseries('RTT percentiles by protocol', g.pos(0, 27, 12, 8), [
        g.target('protocol:skeletonhunter_probe_rtt_seconds:%s_rate1m{%s}' % [p, proto], p + ' {{protocol}}')
        for p in ['p50', 'p90', 'p99']
      ], 's', 'Probe round-trip time over every skeleton pair; +10 µs matters on RDMA paths.'),
      g.timeseries('RTT p99 per ToR', g.pos(12, 27, 12, 8),
                   [g.target('tor:skeletonhunter_probe_rtt_seconds:p99_rate1m{%s}' % torProto, '{{tor}} {{protocol}}')], 's',
                   '99th percentile probe RTT over the pairs with an endpoint under the ToR: one slow ToR stands out here before it drops packets.'),
      g.panel(
        'heatmap', 'RTT distribution', g.pos(0, 35, 24, 8),
        [g.target('sum by (le) (protocol_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m{%s})' % proto, '{{le}}') { format: 'heatmap' }],
        'Probes per second in each RTT bucket.',
        defaults={ unit: 'ops' },
        options={ calculate: false, yAxis: { unit: 's' }, cellGap: 1, color: { mode: 'scheme', scheme: 'Oranges' } },
      ),

      g.row('Localization', 43),
      g.timeseries('Component blame over time', g.pos(0, 44, 12, 9), [g.target(blame, '{{kind}} {{id}}')], 'percentunit',
                   "The localizer's estimated failure probability per component.", defaults={ min: 0, max: 1 }),
      g.stateTimeline(
        'Faulty components', g.pos(12, 44, 12, 9),
        g.target('max by (kind, id) (skeletonhunter_component_faulty{%s})' % cl, '{{kind}} {{id}}'),
        alarm, g.binaryMappings('ok', 'FAULTY'),
        "1 while the localizer's hypothesis test marks the component faulty.",
      ),
      g.table('Blame now', g.pos(0, 53, 24, 7), [g.tableTarget('sort_desc(%s)' % blame)], [g.hide(['Time'])],
              "The localizer's current estimated failure probability per component, highest first.",
              defaults={ unit: 'percentunit', thresholds: loss }),
    ],
  )
