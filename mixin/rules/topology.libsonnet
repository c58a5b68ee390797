// Recording rules, levels `src`/`dst` and `topology`: skeletonhunter_node_info
// relabelled to src_*/dst_* and joined onto the pair series, so that
// aggregates and alerts know where both ends of a pair sit; then summed per
// pair of ToRs (`torpair_le`, `torpair`) for the aggregates. Pairs whose
// exporters have not reported skeletonhunter_node_info are left out.
local rtt = import 'rtt.libsonnet';
local kinds = ['node', 'nic', 'host', 'tor', 'spine', 'pod', 'tenant'];
// The location labels a pair takes from each end (its node id it has).
local located = ['host', 'tor', 'spine', 'pod', 'tenant'];
local joined = [
  'pair:skeletonhunter_probe_sent:rate1m',
  'pair:skeletonhunter_probe_lost:rate1m',
  'pair:skeletonhunter_probe_loss:ratio_rate1m',
  'pair:skeletonhunter_probe_rtt_seconds:p99_rate1m',
  'pair:skeletonhunter_probe_unreachable:bool',
];
// The labels of a `torpair` series: what the aggregates select and group by.
local torpair = ['tor', 'spine', 'tenant'];
local torpairLabels = std.join(', ', [p + '_' + k for p in ['src', 'dst'] for k in torpair]);
// The topology series summed per pair of ToRs (`torpair:`).
local torpairSummed = [
  'topology:skeletonhunter_probe_sent:rate1m',
  'topology:skeletonhunter_probe_lost:rate1m',
];

local prefixed(side, ks) = std.join(', ', [side + '_' + k for k in ks]);

{
  // skeletonhunter_node_info, and for an hour the last identity of a node
  // whose exporter went dark (an unreachable container), so the alerts about
  // it still say where it is. One series per node.
  nodeInfo(c):: 'skeletonhunter_node_info or on (%(n)s) topk by (%(n)s) (1, last_over_time(skeletonhunter_node_info[%(r)s]))' % {
    n: c.labels.node,
    r: c.identityRetention,
  },

  // `source` with every identity label (named by `label(kind)`) copied to
  // `side`_<kind>, value 1: src from nodeInfo, dst from src's record of
  // the same round, so that the hour of node_info is read once, not twice.
  local relabel(side, label, source) = {
    local chain = std.foldl(
      function(inner, k) 'label_replace(%s, "%s_%s", "$1", "%s", "(.*)")' % [inner, side, k, label(k)],
      kinds,
      source,
    ),
    record: side + ':skeletonhunter_node_info:relabel',
    expr: 'max by (%s) (\n  %s\n)\n' % [prefixed(side, kinds), chain],
  },

  // `series` with the location of both ends as src_*/dst_* labels.
  local join(series) = {
    record: std.strReplace(series, 'pair:', 'topology:'),
    expr: |||
      %(s)s
      * on (src_node) group_left (%(src)s) src:skeletonhunter_node_info:relabel
      * on (dst_node) group_left (%(dst)s) dst:skeletonhunter_node_info:relabel
    ||| % { s: series, src: prefixed('src', located), dst: prefixed('dst', located) },
  },

  // RTT bucket rates per pair of ToRs (with both ends' spine and tenant),
  // joined per pair and summed in one rule: the aggregates need no more, and
  // it records (ToR pairs × tenants) × 25 series instead of pairs × 25.
  local torpairBuckets(c) = {
    record: 'torpair_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m',
    expr: |||
      sum by (%(by)s) (
        (
          %(buckets)s
        )
        * on (src_node) group_left (%(src)s) src:skeletonhunter_node_info:relabel
        * on (dst_node) group_left (%(dst)s) dst:skeletonhunter_node_info:relabel
      )
    ||| % {
      by: torpairLabels + ', protocol, le',
      buckets: std.strReplace(rtt.buckets(c, 'src_node, dst_node, protocol'), '\n', '\n    '),
      src: prefixed('src', torpair),
      dst: prefixed('dst', torpair),
    },
  },

  // The probe rates summed per pair of ToRs: one pass over the pairs, so
  // that the aggregates read a few series per ToR instead of every pair.
  local torpairSum(series) = {
    record: std.strReplace(series, 'topology:', 'torpair:'),
    expr: 'sum by (%s, protocol) (%s)' % [torpairLabels, series],
  },

  group(c):: {
    name: 'skeletonhunter-topology',
    rules: [
      relabel('src', function(k) c.labels[k], $.nodeInfo(c)),
      relabel('dst', function(k) 'src_' + k, 'src:skeletonhunter_node_info:relabel'),
    ] + [join(s) for s in joined] + [
      torpairBuckets(c),
    ] + [torpairSum(s) for s in torpairSummed] + [
      {
        record: 'torpair:skeletonhunter_probe_unreachable_pairs:count',
        expr: 'count by (%s) (topology:skeletonhunter_probe_unreachable:bool)' % torpairLabels,
      },
      // The fabric's RTT distribution (the dashboards' heatmap).
      {
        record: 'protocol_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m',
        expr: 'sum by (protocol, le) (torpair_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m)',
      },
    ],
  },
}
