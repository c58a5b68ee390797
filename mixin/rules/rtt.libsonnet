// The RTT histogram in both shapes the exporter serves
// (`metrics.histograms`): classic `_bucket` series, and one native
// histogram series per pair on a Prometheus with native histograms. A rule
// reads both (native first, `or` classic), so one rule set serves either
// store and a mixed fleet; a store only ever holds one shape per pair.
//
// Prometheus 2.42 (checked by hand; ops/native_rules.rs runs these forms) can
// aggregate native histograms (`sum`, `rate`) and take
// `histogram_quantile` of them, but cannot join them (`* on () group_left`
// drops them), relabel them (`label_replace` turns them into 0) or record
// them reliably (a recorded rate is often discarded for float rounding).
// So no rule records a histogram: quantiles are taken in the same rule, and
// where the topology join needs one float per bucket the native histogram
// is cut at the classic bounds (`histogram_fraction`, only with
// `_config.nativeHistograms`: VictoriaMetrics has no such function and
// would fail the whole rule).
local metric = 'skeletonhunter_probe_rtt_seconds';

// The exporter's classic bucket bounds, 1 µs × 2^k for k in 0..23, spelt
// as a native-histogram Prometheus writes `le` for a classic histogram it
// scrapes over protobuf (Go's shortest %g: 1e-06, 1.6e-05, 0.000128), so
// that cut native buckets sum with the classic ones of the same store.
local bounds = [
  local us = std.pow(2, k);
  if us < 10 then '%de-06' % us
  else if us < 100 then '%d.%de-05' % [std.floor(us / 10), us % 10]
  else '%d.%06d' % [std.floor(us / 1000000), us % 1000000]
  for k in std.range(0, 23)
];

{
  quantiles:: [0.5, 0.9, 0.99],
  // The name part of a quantile: 0.5 -> p50, 0.99 -> p99.
  pName(q):: 'p' + std.strReplace(std.format('%g', [q * 100]), '.', ''),

  // Per-`by` rates: the native histograms, and the classic buckets.
  native(by):: 'sum by (%s) (rate(%s[1m]))' % [by, metric],
  classic(by):: 'sum by (%s, le) (rate(%s_bucket[1m]))' % [by, metric],

  // Quantile `q` per `by` from either shape; portable (VictoriaMetrics
  // ignores the native half).
  quantile(q, by):: |||
    histogram_quantile(%(q)g, %(native)s)
    or
    histogram_quantile(%(q)g, %(classic)s)
  ||| % { q: q, native: $.native(by), classic: $.classic(by) },

  // Mean RTT per `by`: classic _sum/_count, and with nativeHistograms the
  // native histogram's sum and count.
  mean(c, by)::
    local classic = |||
      sum by (%(by)s) (rate(%(m)s_sum[1m]))
      / (sum by (%(by)s) (rate(%(m)s_count[1m])) > 0)
    ||| % { by: by, m: metric };
    local native = |||
      histogram_sum(%(h)s)
      / (histogram_count(%(h)s) > 0)
    ||| % { h: $.native(by) };
    if c.nativeHistograms then native + 'or\n' + classic else classic,

  // Bucket rates per `by` and `le` as floats: the classic buckets, and with
  // nativeHistograms the native histograms cut at the classic bounds
  // (count × fraction at or below each bound; the last is the count).
  buckets(c, by)::
    local h = $.native(by);
    local cut(le, value) = 'label_replace(%s, "le", "%s", "", "")' % [value, le];
    local natives = [
      cut(le, 'histogram_count(%s) * histogram_fraction(0, %s, %s)' % [h, le, h])
      for le in bounds
    ] + [cut('+Inf', 'histogram_count(%s)' % h)];
    std.join('\nor\n', [$.classic(by)] + (if c.nativeHistograms then natives else [])),
}
