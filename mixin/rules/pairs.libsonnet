// Recording rules, level `pair`: one series per skeleton probe pair, then
// per protocol and for the whole fabric. Rates use a 1m window: scrape the
// exporters every 15s or faster. Loss is always rate(lost)/rate(sent) over
// the same window, never an average of per-pair ratios, so busy and idle
// pairs weigh by the probes they sent.
// RTT quantiles come straight from the raw histograms (rtt.libsonnet):
// no per-pair bucket series is recorded, which at scale would be 25 series
// per pair and protocol, more than the exporters' own. Each per-pair
// quantile re-reads every histogram, so only p99 (the topology join's) is
// recorded by default (`_config.pairRttQuantiles`, `pairRttMean`).
local rtt = import 'rtt.libsonnet';

{
  // Rules `level:skeletonhunter_probe_rtt_seconds:pNN_rate1m`: over the
  // `level_le:` bucket rates, or with `by` from the raw histograms.
  quantileRules(level, by=null, quantiles=rtt.quantiles):: [
    {
      record: '%s:skeletonhunter_probe_rtt_seconds:%s_rate1m' % [level, rtt.pName(q)],
      expr: if by == null
      then 'histogram_quantile(%g, %s_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m)' % [q, level]
      else rtt.quantile(q, by),
    }
    for q in quantiles
  ],

  // lost / sent of one level, clamped: rate extrapolation can push lost a
  // hair above sent, and a ratio stays <= 1.
  lossRatioRule(level):: {
    record: '%s:skeletonhunter_probe_loss:ratio_rate1m' % level,
    expr: |||
      clamp_max(
        %(level)s:skeletonhunter_probe_lost:rate1m
        / (%(level)s:skeletonhunter_probe_sent:rate1m > 0),
        1
      )
    ||| % { level: level },
  },

  group(config):: {
    local c = config { pair: 'src_node, dst_node, protocol' },
    name: 'skeletonhunter-pairs',
    rules: [
      {
        record: 'pair:skeletonhunter_probe_sent:rate1m',
        expr: 'sum by (%(pair)s) (rate(skeletonhunter_probe_sent_total[1m]))' % c,
      },
      // A pair that never lost a probe may have no lost series yet: count it as 0.
      {
        record: 'pair:skeletonhunter_probe_lost:rate1m',
        expr: |||
          sum by (%(pair)s) (rate(skeletonhunter_probe_lost_total[1m]))
          or
          pair:skeletonhunter_probe_sent:rate1m * 0
        ||| % c,
      },
      $.lossRatioRule('pair'),
    ] + $.quantileRules('pair', c.pair, c.pairRttQuantiles) + (
      if c.pairRttMean then [{
        record: 'pair:skeletonhunter_probe_rtt_seconds:mean_rate1m',
        expr: rtt.mean(c, c.pair),
      }] else []
    ) + [
      // Fraction of the last minute's TCP dial checks that connected.
      {
        record: 'pair:skeletonhunter_probe_dial_success:avg1m',
        expr: 'avg by (%(pair)s) (avg_over_time(skeletonhunter_probe_dial_success[1m]))' % c,
      },
      {
        record: 'pair:skeletonhunter_probe_dial_failures:rate1m',
        expr: 'sum by (%(pair)s) (rate(skeletonhunter_probe_dial_failures_total[1m]))' % c,
      },
      // 1 for a pair that gets nothing through: every protocol loses (almost)
      // every probe, or every TCP dial of the last minute failed; and it is
      // still probed. A series its exporter removed (a peer that left, or a
      // new peer's address label once its reply named it) keeps its last
      // minute in the 1m windows for a minute more: one failed dial of a
      // peer restarting its exporter would hold as "unreachable" long
      // enough to fire, under a name that no longer exists.
      {
        record: 'pair:skeletonhunter_probe_unreachable:bool',
        expr: |||
          (
            min by (src_node, dst_node) (pair:skeletonhunter_probe_loss:ratio_rate1m) >= bool %(unreachableLossRatio)g == 1
            or
            max by (src_node, dst_node) (pair:skeletonhunter_probe_dial_success:avg1m) == bool 0 == 1
          )
          and on (src_node, dst_node) group by (src_node, dst_node) (skeletonhunter_probe_sent_total)
        ||| % c,
      },
      {
        record: 'protocol:skeletonhunter_probe_loss:ratio_rate1m',
        expr: |||
          sum by (protocol) (pair:skeletonhunter_probe_lost:rate1m)
          / (sum by (protocol) (pair:skeletonhunter_probe_sent:rate1m) > 0)
        |||,
      },
    ] + $.quantileRules('protocol', 'protocol') + [
      {
        record: 'fabric:skeletonhunter_probe_loss:ratio_rate1m',
        expr: 'sum(pair:skeletonhunter_probe_lost:rate1m) / (sum(pair:skeletonhunter_probe_sent:rate1m) > 0)',
      },
      {
        record: 'fabric:skeletonhunter_probe_pairs:count',
        expr: 'count(count by (src_node, dst_node) (pair:skeletonhunter_probe_sent:rate1m))',
      },
      {
        record: 'fabric:skeletonhunter_probe_unreachable_pairs:count',
        expr: 'count(pair:skeletonhunter_probe_unreachable:bool) or vector(0)',
      },
    ],
  },
}
