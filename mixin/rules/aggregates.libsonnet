// Recording rules, levels `tor`, `spine`, `tenant`: loss and RTT per
// component by protocol, from the per-ToR-pair sums of the topology join
// (`torpair:`, `torpair_le:`): a few series per pair of ToRs, not one per
// pair, so no rule here reads every pair. Which pairs count for a
// component (the path model of ARCHITECTURE.md), decided per ToR pair,
// which holds the same pairs:
//   tor     every pair with an endpoint beneath the ToR (once, even when both are)
//   spine   pairs between different ToRs with an endpoint beneath the spine
//   tenant  pairs with both endpoints in the tenant
// The series are labelled by the kind name (`tor`, `spine`, `tenant`), like
// the ones `skeletonhunter-localizer rules` generates with static matchers.
local pairs = import 'pairs.libsonnet';

// `series` at the given end, its `end`_`kind` label copied to `kind`.
local at(kind, end, series) =
  'label_replace(%s, "%s", "$1", "%s_%s", "(.+)")' % [series, kind, end, kind];

// `series{filter}` kept where its ends agree (`and`) or left out where they
// agree (`unless`) in `label`: each side copies one end's `label` to
// same_`label` and the sides match on every label. (Overwriting dst_`label`
// with src_`label` instead would collide on the `torpair` series, which
// have no node labels to keep them apart.)
local ends(series, filter, op, label) =
  'label_replace(%s{%s}, "same_%s", "$1", "src_%s", "(.*)") %s label_replace(%s, "same_%s", "$1", "dst_%s", "(.*)")'
  % [series, filter, label, label, op, series, label, label];

// The pair sets of each kind as a PromQL body for `agg by (...) (body)`.
// `series` is a `torpair` or `torpair_le` series: both carry the src_/dst_
// tor, spine and tenant labels, and one series per ToR pair keeps the
// `or` counting a pair beneath two of the component's ToRs once.
local members = {
  tor(series):: [
    at('tor', 'src', series + '{src_tor!=""}'),
    at('tor', 'dst', series + '{dst_tor!=""}'),
  ],
  spine(series):: [
    at('spine', end, '(%s)' % ends(series, '%s_spine!=""' % end, 'unless', 'tor'))
    for end in ['src', 'dst']
  ],
  tenant(series):: [
    at('tenant', 'src', '(%s)' % ends(series, 'src_tenant!=""', 'and', 'tenant')),
  ],
};

local aggregate(kind, agg, by, series) = {
  record: std.strReplace(std.strReplace(series, 'torpair_le:', kind + '_le:'), 'torpair:', kind + ':'),
  expr: '%s by (%s) (\n  %s\n)\n' % [agg, by, std.join('\n  or\n  ', members[kind](series))],
};

local rulesOf(kind) = [
  aggregate(kind, 'sum', kind + ', protocol', 'torpair:skeletonhunter_probe_sent:rate1m'),
  aggregate(kind, 'sum', kind + ', protocol', 'torpair:skeletonhunter_probe_lost:rate1m'),
  pairs.lossRatioRule(kind),
  aggregate(kind, 'sum', kind + ', protocol, le', 'torpair_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m'),
] + pairs.quantileRules(kind) + [
  aggregate(kind, 'sum', kind, 'torpair:skeletonhunter_probe_unreachable_pairs:count'),
];

{
  group(c):: {
    name: 'skeletonhunter-aggregates',
    rules: rulesOf('tor') + rulesOf('spine') + rulesOf('tenant'),
  },
}
