// The recording rules, named `level:metric:operation`. Levels:
//   pair      src_node, dst_node, protocol (one skeleton probe pair)
//   src, dst  skeletonhunter_node_info relabelled to src_*/dst_* for joins
//   topology  a pair plus the topology of both ends (src_host, src_tor,
//             src_spine, src_pod, src_tenant and the dst_* twins)
//   torpair_le  RTT bucket rates per pair of ToRs (src_/dst_ tor, spine,
//             tenant) and `le`; no per-pair bucket series is recorded
//   torpair   probe rates and unreachable pairs per pair of ToRs (the same
//             labels): the per-component sums read these, not every pair
//   protocol  all pairs of one probe protocol
//   fabric    everything
//   tor, spine, tenant  per-component aggregates (aggregates.libsonnet)
local aggregates = import 'aggregates.libsonnet';
local pairs = import 'pairs.libsonnet';
local topology = import 'topology.libsonnet';

{
  prometheusRules+:: {
    // Every one of these groups reads every pair's series each evaluation:
    // recorded with the opt-in `pairDetail: true` only.
    groups+: if $._config.pairDetail then [
      pairs.group($._config),
      topology.group($._config),
      aggregates.group($._config),
    ] else [],
  },
}
