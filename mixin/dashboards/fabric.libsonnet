// The fabric overview: loss and RTT across all skeleton pairs, per ToR and
// spine, and what the localizer blames. Alerts about pairs and components
// link here (with var-tor set to the pair's source ToR). Loss, pair and RTT
// panels read the localizer's overview series (skeletonhunter_overview_*,
// skeletonhunter_overview_worst_pair_*): it reads every pair each cycle anyway, so
// they cost the store no rule over every pair.
local g = import '../lib/grafana.libsonnet';

function(c)
  local common = (import 'common.libsonnet')(c);
  local v = common.variables;
  local cl = common.cluster;
  // An area of the overview: the fabric, or the ToRs, spines, tenants.
  local area(scope, more='') = '%s, scope="%s"%s' % [cl, scope, more];
  local tors = area('tor', ', ' + g.match('id', 'tor'));
  // Worst pairs in the chosen tenants whose source is under the chosen ToRs.
  local pairs = cl + ', ' + g.match('tenant') + ', ' + g.match('src_tor', 'tor');
  local n = c.pairPanelLimit;
  local pairLoss = g.topk(n, 'max by (src_node, dst_node) (skeletonhunter_overview_worst_pair_loss_ratio{%s})' % pairs);
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
    [v.cluster, v.job, v.tenant(), v.tor],
    [
      g.row('Now', 0),
      top(0, 'Fabric loss', 'max(skeletonhunter_overview_loss_ratio{%s})' % area('fabric'), loss,
          "Probes lost / probes sent over the localizer's window, all skeleton pairs.", 'percentunit'),
      top(4, 'Skeleton pairs probed', 'max(skeletonhunter_overview_pairs{%s})' % area('fabric', ', state="all"'), count,
          'Distinct src -> dst pairs the localizer analyzed in its last cycle.', 'short'),
      top(8, 'Unreachable pairs', 'max(skeletonhunter_overview_pairs{%s})' % area('fabric', ', state="unreachable"'), alarm,
          'Pairs losing at least 95 % of their probes (or TCP dials) over the window.', 'short'),
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
                   [g.target('max by (id) (skeletonhunter_overview_loss_ratio{%s})' % tors, '{{id}}')],
                   'percentunit', 'Pairs with an endpoint under the ToR.'),
      g.timeseries('Loss per spine', g.pos(8, 18, 8, 8),
                   [g.target('max by (id) (skeletonhunter_overview_loss_ratio{%s})' % area('spine'), '{{id}}')],
                   'percentunit', 'Pairs between ToRs with an endpoint under the spine.'),
      g.table(
        'Worst pairs', g.pos(16, 18, 8, 8),
        [g.tableTarget(g.topk(20, 'max by (src_node, dst_node, src_tor, dst_tor) (skeletonhunter_overview_worst_pair_loss_ratio{%s})' % pairs))],
        [g.hide(['Time']), { id: 'sortBy', options: { sort: [{ field: 'Value', desc: true }] } }],
        'The 20 lossiest skeleton pairs now.',
        { unit: 'percentunit', thresholds: loss, custom: { cellOptions: { type: 'color-text' } } },
      ),

      g.row('RTT', 26),
      g.timeseries('Pair RTT across the fabric', g.pos(0, 27, 12, 8), [
        g.target('max by (quantile) (skeletonhunter_overview_pair_rtt_seconds{%s})' % area('fabric'), 'quantile {{quantile}}'),
      ], 's', "Median and 99th percentile of the pairs' median probe RTT (the RTT form the localizer reads); +10 µs matters on RDMA paths."),
      g.timeseries('Pair RTT p99 per ToR', g.pos(12, 27, 12, 8),
                   [g.target('max by (id) (skeletonhunter_overview_pair_rtt_seconds{%s, quantile="0.99"})' % tors, '{{id}}')], 's',
                   "99th percentile of the median RTT of the pairs with an endpoint under the ToR: one slow ToR stands out here before it drops packets."),
      g.panel(
        'heatmap', 'Pairs by RTT', g.pos(0, 35, 24, 8),
        [g.target('max by (le) (skeletonhunter_overview_pairs_by_rtt{%s})' % cl, '{{le}}') { format: 'heatmap' }],
        "Skeleton pairs in each bucket of their median RTT.",
        defaults={ unit: 'short' },
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
