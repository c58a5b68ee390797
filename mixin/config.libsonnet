// What a user of the mixin overrides: `(import 'mixin.libsonnet') +
// { _config+:: { exporterSelector: 'job="gpu-probes"' } }`. The defaults
// render exactly the shipped rules/ and dashboards/.
{
  _config+:: {
    // Label matchers of the scrape jobs (inside `{...}`): the exporters and
    // the localizer. Alerts about a job being down or absent use them.
    exporterSelector: 'job="skeletonhunter-exporter"',
    localizerSelector: 'job="skeletonhunter-localizer"',

    // Labels of skeletonhunter_node_info, by topology kind (the vocabulary
    // of common::topology::Kind). Pair series carry src_<kind>/dst_<kind>
    // whatever these are; a rename of the identity labels is an edit here.
    labels: {
      node: 'node_id',
      nic: 'nic',
      host: 'host',
      tor: 'tor',
      spine: 'spine',
      pod: 'network_pod',
      tenant: 'tenant',
    },

    // Links in alert annotations: runbook_url is runbookURL + '#<anchor>';
    // dashboard_url is grafanaURL + '/d/<uid>' (empty: a path relative to
    // the Grafana that shows the alert).
    runbookURL: 'https://github.com/skeletonhunter/skeletonhunter/blob/main/docs/runbooks.md',
    grafanaURL: '',

    // A pair counts as unreachable when every protocol loses at least this
    // fraction of its probes (or every TCP dial fails).
    unreachableLossRatio: 0.95,
    // Alert thresholds and `for:` durations.
    pairUnreachableFor: '1m',
    pairLossThreshold: 0.05,
    pairLossFor: '5m',
    componentFaultyFor: '30s',
    exporterDownFor: '1m',
    exportersAbsentFor: '5m',
    topologyEntryMissingFor: '15m',
    localizerDownFor: '2m',
    localizerStaleSeconds: 60,
    localizerStaleFor: '1m',
    localizerQueryErrorsFor: '10m',
    localizerBlindCoverage: 0.9,
    localizerBlindFor: '2m',
    localizerAlertPostFailingFor: '5m',
    // Window over which a dropped alert update fires (no `for:`: once is enough).
    localizerAlertsDroppedWindow: '15m',
    // How long a node whose exporter went dark keeps its last identity in
    // the topology join and in alerts.
    identityRetention: '1h',

    // The per-pair detail, an opt-in. false (the default, the rule set for
    // any fleet size) renders only alerting rules, none reading a probe
    // series or every node's identity: a round costs the same at any number
    // of pairs. true adds the recording rules (per pair, the topology join,
    // per ToR/spine/tenant), the pair alerts reading them, and the node
    // location of the exporter-down and node alerts joined from every
    // node's identity (so Alertmanager's inhibition by location reaches
    // them). Those read every pair's series every evaluation: seconds at a
    // few thousand pairs, minutes at ~100,000 on a store shared with
    // ingestion (docs/scaling.md). The localizer reads every pair itself
    // either way, and its own alerts carry the location labels.
    pairDetail: false,

    // Per-pair RTT series: the quantiles recorded as
    // pair:skeletonhunter_probe_rtt_seconds:pNN_rate1m (0.99 feeds the
    // topology join and the dashboards; add 0.5 and 0.9 for the old set),
    // and whether to record the mean (…:mean_rate1m). Each one re-reads
    // every pair's histogram every evaluation, the costliest rules at scale.
    pairRttQuantiles: [0.99],
    pairRttMean: false,

    // Also read native RTT histograms where a rule needs more than
    // `histogram_quantile` of them: the mean, and the per-ToR, spine and
    // tenant quantiles (the native histogram cut at the classic bucket
    // bounds with `histogram_fraction`). Needs Prometheus with
    // `--enable-feature=native-histograms`; VictoriaMetrics/vmalert lack
    // these functions and fail such a rule, so keep false there. The pair
    // and protocol quantiles read native histograms either way.
    nativeHistograms: false,

    // Grafana dashboards.
    dashboardUids: {
      fabric: 'skeletonhunter-fabric',
      tenant: 'skeletonhunter-tenant',
      health: 'skeletonhunter-health',
    },
    // Every dashboard carries these tags; the dashboards' link menu lists
    // the dashboards tagged with the first one.
    dashboardTags: ['skeletonhunter'],
    dashboardTitlePrefix: 'SkeletonHunter / ',
    dashboardRefresh: '30s',
    dashboardTimeFrom: 'now-1h',
    // The data source input Grafana's import asks for (`${DS_PROMETHEUS}`).
    datasourceInput: 'DS_PROMETHEUS',
    // Loss ratios at which panels turn yellow, orange and red.
    lossSteps: [0.001, 0.01, 0.1],
    // Rows of the per-pair panels (matrices, pair loss and RTT over time):
    // the `topk` worst pairs. A fleet of 1,000 nodes has tens of thousands
    // of skeleton pairs, more than a browser draws.
    pairPanelLimit: 50,
  },
}
