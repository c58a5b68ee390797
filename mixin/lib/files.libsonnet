// The shipped files a mixin renders to, by path relative to the repository
// root: rules/*.yml and rules/pair-detail/*.yml (with a header comment
// each) and dashboards/*.json.
local manifest = import 'manifest.libsonnet';

local generated = |||
  GENERATED from mixin/ (jsonnet): edit the mixin, not this file, and
  run mixin/render.sh. Comments on single rules are in the mixin's source.
|||;

// Keys that come first, in this order; the others follow sorted.
local ruleOrder = [
  'name', 'rules', 'record', 'alert', 'expr', 'for', 'labels', 'annotations',
  'kind', 'summary', 'description', 'evidence', 'runbook_url', 'dashboard_url',
];
local dashboardOrder = [
  '__inputs', '__requires', 'uid', 'name', 'type', 'title', 'label', 'description', 'tags',
  'id', 'datasource', 'gridPos', 'expr', 'legendFormat', 'targets', 'fieldConfig', 'options',
  'transformations', 'templating', 'panels',
];

local ruleFile(header, groups) =
  manifest.comment(generated + '\n' + header) + manifest.yaml({ groups: groups }, ruleOrder);

function(mixin)
  // The pair detail (pairDetail: true) is shipped beside the default set
  // whatever `mixin` says, in rules/pair-detail/: files a user adds to the
  // default ones, no group in both. Only rules/skeletonhunter.alerts.yml
  // follows `pairDetail` (the node location of two alerts).
  local detail = mixin { _config+:: { pairDetail: true } };
  local recording = detail.prometheusRules.groups;
  local named(groups, names) = [g for g in groups if std.member(names, g.name)];
  local placed = ['skeletonhunter-pairs', 'skeletonhunter-topology', 'skeletonhunter-aggregates'];
  local pairAlerts = 'skeletonhunter-pair-alerts';
  local pairDetail = mixin._config.pairDetail;
  assert std.sort([g.name for g in recording]) == std.sort(placed) :
         'every recording group goes to one rules file; got ' + std.toString([g.name for g in recording]);
  assert std.length(named(mixin.prometheusRules.groups, placed)) == (if pairDetail then 3 else 0) :
         'prometheusRules follows pairDetail';
  {
    'rules/pair-detail/skeletonhunter.rules.yml': ruleFile(|||
      SkeletonHunter recording rules: per-pair series and the topology join.
      Part of the per-pair detail, an opt-in (the mixin's pairDetail): load the
      files of this directory beside ../skeletonhunter.alerts.yml. They read
      every pair's series each evaluation (docs/scaling.md).

      Names follow `level:metric:operation`. Levels:
        pair      src_node, dst_node, protocol (one skeleton probe pair)
        src, dst  skeletonhunter_node_info relabelled to src_*/dst_* for joins
        topology  a pair plus the topology of both ends (src_host, src_tor,
                  src_spine, src_pod, src_tenant and the dst_* twins); pairs whose
                  exporters have not reported skeletonhunter_node_info are left out
        torpair_le  RTT bucket rates per pair of ToRs with both ends' spine and
                  tenant, and `le` (what the per-ToR/spine/tenant quantiles read)
        protocol  all pairs of one probe protocol
        fabric    everything
      Per-ToR/spine/tenant aggregates are in skeletonhunter.aggregates.yml.

      RTT quantiles read classic `_bucket` series or native histograms (a
      Prometheus with native histograms); no per-pair bucket series is recorded.
      Rates use a 1m window: scrape the exporters every 15s or faster.
      Loss is always rate(lost)/rate(sent) over the same window, never an average
      of per-pair ratios, so busy and idle pairs weigh by the probes they sent.
    |||, named(recording, ['skeletonhunter-pairs', 'skeletonhunter-topology'])),

    'rules/pair-detail/skeletonhunter.aggregates.yml': ruleFile(|||
      SkeletonHunter per-component aggregates: loss and RTT per ToR, spine and
      tenant, by protocol. Needs skeletonhunter.rules.yml (the topology join).
      Part of the per-pair detail, an opt-in.

      Which pairs count for a component (the path model of ARCHITECTURE.md):
        tor     every pair with an endpoint beneath the ToR (once, even when both are)
        spine   pairs between different ToRs with an endpoint beneath the spine
        tenant  pairs with both endpoints in the tenant

      `skeletonhunter-localizer rules` generates the same series (same names and
      labels, same pair sets) with static matchers instead of a join. Load this
      file OR the generated one, not both: both would record the same series.
    |||, named(recording, ['skeletonhunter-aggregates'])),

    'rules/pair-detail/skeletonhunter.pair-alerts.yml': ruleFile(|||
      SkeletonHunter per-pair alerts. Part of the per-pair detail, an opt-in:
      they read the recordings of skeletonhunter.rules.yml (this directory).
      Labels follow the convention of ../skeletonhunter.alerts.yml.
    |||, named(detail.prometheusAlerts.groups, [pairAlerts])),

    'rules/skeletonhunter.alerts.yml': ruleFile(|||
      SkeletonHunter alerting rules. %s

      Scrape jobs this file expects: %s for the exporters and
      %s for the localizer (the mixin's exporterSelector and
      localizerSelector).

      Label convention (Alertmanager routing and inhibition rely on it; the
      localizer's own alerts follow it too):
        kind       node | nic | host | tor | spine | pod | pair | exporter | localizer
        component  the id of that component ("<src_node>-><dst_node>" for a pair)
        severity   critical | warning
        symptom    loss | unreachable | latency | flapping (network alerts) | host_stack (a busy host)
        location   where the component sits, wherever known:
                   single-place alerts carry `%s`, `%s`, `%s` (and `%s`);
                   pair alerts carry src_host/src_tor/src_spine and the dst_* twins;
                   a ToR alert also carries src_tor = dst_tor = its id (a spine
                   alert src_spine = dst_spine, a node alert src_node = dst_node,
                   a host alert src_host = dst_host) so Alertmanager's `equal`
                   can match pair alerts at either end.
      Every alert links to its runbook (runbook_url) and a dashboard (dashboard_url).
    ||| % [
      if pairDetail then 'Rendered with pairDetail: true: the exporter-down\n'
        + '  and node alerts carry their location, joined from every node\'s\n'
        + '  skeletonhunter_node_info. Load pair-detail/*.yml too (the pair alerts\n'
        + '  and the recordings the evidence quotes).'
      else 'None reads a probe series or every node\'s identity:\n'
        + '  an evaluation costs the same at any number of pairs. The per-pair\n'
        + '  recordings and alerts are an opt-in in pair-detail/ (load them too).',
      mixin._config.exporterSelector,
      mixin._config.localizerSelector,
      mixin._config.labels.host,
      mixin._config.labels.tor,
      mixin._config.labels.spine,
      mixin._config.labels.node,
    ], [g for g in mixin.prometheusAlerts.groups if g.name != pairAlerts]),
  } + {
    ['dashboards/' + name]: manifest.json(mixin.grafanaDashboards[name], dashboardOrder)
    for name in std.objectFields(mixin.grafanaDashboards)
  }
