// Recording rules, levels `tor`, `spine`, `tenant`: loss and RTT per
// component by protocol, from the topology join. Which pairs count for a
// component (the path model of ARCHITECTURE.md):
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
// agree (`unless`) in `label`; `on` are the series' pair labels.
local ends(series, filter, op, on, label) =
  '%s{%s} %s on (%s, dst_%s) label_replace(%s, "dst_%s", "$1", "src_%s", "(.*)")'
  % [series, filter, op, on, label, series, label, label];

// The pair sets of each kind as a PromQL body for `agg by (...) (body)`.
// `series` is a topology-level series, `on` its pair labels.
local members = {
  tor(series, on):: [
    at('tor', 'src', series + '{src_tor!=""}'),
    at('tor', 'dst', series + '{dst_tor!=""}'),
  ],
  spine(series, on):: [
    at('spine', end, '(%s)' % ends(series, '%s_spine!=""' % end, 'unless', on, 'tor'))
    for end in ['src', 'dst']
  ],
  tenant(series, on):: [
    at('tenant', 'src', '(%s)' % ends(series, 'src_tenant!=""', 'and', on, 'tenant')),
  ],
};

local aggregate(kind, agg, by, series, on) = {
  record: std.strReplace(std.strReplace(series, 'topology_le:', kind + '_le:'), 'topology:', kind + ':'),
  expr: '%s by (%s) (\n  %s\n)\n' % [agg, by, std.join('\n  or\n  ', members[kind](series, on))],
};

local rulesOf(kind) = [
  aggregate(kind, 'sum', kind + ', protocol', 'topology:skeletonhunter_probe_sent:rate1m', 'src_node, dst_node, protocol'),
  aggregate(kind, 'sum', kind + ', protocol', 'topology:skeletonhunter_probe_lost:rate1m', 'src_node, dst_node, protocol'),
  pairs.lossRatioRule(kind),
  aggregate(kind, 'sum', kind + ', protocol, le', 'topology_le:skeletonhunter_probe_rtt_seconds_bucket:rate1m', 'src_node, dst_node, protocol, le'),
] + pairs.quantileRules(kind) + [
  aggregate(kind, 'count', kind, 'topology:skeletonhunter_probe_unreachable:bool', 'src_node, dst_node') {
    record: kind + ':skeletonhunter_probe_unreachable_pairs:count',
  },
];

{
  group(c):: {
    name: 'skeletonhunter-aggregates',
    rules: rulesOf('tor') + rulesOf('spine') + rulesOf('tenant'),
  },
}
