// Alerting rules. Label convention (Alertmanager routing and inhibition
// rely on it; the localizer's own alerts follow it too):
//   kind       node | nic | host | tor | spine | pod | pair | exporter | localizer
//   component  the id of that component ("<src_node>-><dst_node>" for a pair)
//   severity   critical | warning
//   symptom    loss | unreachable | latency | flapping (network alerts) | host_stack (a busy host)
//   location   where the component sits, wherever known: single-place alerts
//              carry the host, tor, spine (and node) labels; pair alerts carry
//              src_host/src_tor/src_spine and the dst_* twins; a ToR alert
//              also carries src_tor = dst_tor = its id (a spine alert
//              src_spine = dst_spine, a node alert src_node = dst_node, a
//              host alert src_host = dst_host) so Alertmanager's `equal` can
//              match pair alerts at either end.
// Every alert links to its section of docs/runbooks.md (runbook_url) and to
// a dashboard (dashboard_url).
local topology = import '../rules/topology.libsonnet';

// Text written over several lines for the reader of this file, as one line
// (what YAML's `>-` does).
local fold(text) = std.join(' ', [l for l in std.split(std.rstripChars(text, '\n'), '\n') if l != '']);

// A duration in words for descriptions: 1m -> "a minute", 5m -> "5 minutes".
local inWords(d) =
  local n = std.length(d);
  local units = { s: 'second', m: 'minute', h: 'hour', d: 'day' };
  local count = std.parseInt(std.substr(d, 0, n - 1));
  local unit = units[std.substr(d, n - 1, 1)];
  if count == 1 then (if unit == 'hour' then 'an ' else 'a ') + unit
  else '%d %ss' % [count, unit];

// What a selector names in prose: `job="x"` -> x, anything else as written.
local jobName(selector) =
  local n = std.length(selector);
  if std.startsWith(selector, 'job="') && std.endsWith(selector, '"')
     && std.length(std.findSubstr(',', selector)) == 0
  then std.substr(selector, 5, n - 6)
  else selector;

// `{{ with printf "<query>" <args> | query }}<render>{{ else }}<none>{{ end }}`:
// the first value of a PromQL query from an alert template.
local queried(query, args, render, none) =
  '{{ with printf "' + std.strReplace(query, '"', '\\"') + '" ' + args + ' | query }}{{ . | first | value'
  + render + ' }}{{ else }}' + none + '{{ end }}';

{
  local c = $._config,
  local l = c.labels,
  local runbook(anchor) = c.runbookURL + '#' + std.asciiLower(anchor),
  local dashboard(name, query='') = c.grafanaURL + '/d/' + c.dashboardUids[name] + query,
  // The component alert of `kind`, its id copied to `component`, to the
  // kind's own label and to src_/dst_ twins of it.
  local componentOf(kind, label) = |||
    label_replace(label_replace(label_replace(label_replace(
      max by (kind, id, symptom, severity) (skeletonhunter_component_alerting{kind="%(kind)s"}) == 1,
      "component", "$1", "id", "(.*)"), "%(label)s", "$1", "id", "(.*)"),
      "src_%(kind)s", "$1", "id", "(.*)"), "dst_%(kind)s", "$1", "id", "(.*)")
  ||| % { kind: kind, label: label },

  // Without the recording rules (`pairDetail: false`) the pair alerts
  // would read series nobody records: left out with them.
  // Its name differs from the recording group's (`skeletonhunter-pairs`):
  // kube-prometheus' addMixin puts prometheusAlerts and prometheusRules into
  // one PrometheusRule, one rule file, where group names must be unique.
  local pairAlerts = 'skeletonhunter-pair-alerts',
  local wanted(g) = c.pairDetail || g.name != pairAlerts,
  // Only with the pair detail: a node's location joined from every node's
  // identity (that join alone reads every node each round), and text that
  // quotes a recorded series (none is recorded without it).
  local withDetail(text) = if c.pairDetail then text else '',

  prometheusAlerts+:: {
    groups+: std.filter(wanted, [
      {
        name: pairAlerts,
        rules: [
          {
            alert: 'SkeletonHunterPairUnreachable',
            // The localizer names the component within seconds; this alert is
            // the per-pair record that something is cut off for a while.
            expr: |||
              label_join(
                topology:skeletonhunter_probe_unreachable:bool,
                "component", "->", "src_node", "dst_node"
              )
              or on (src_node, dst_node)
              label_join(
                pair:skeletonhunter_probe_unreachable:bool,
                "component", "->", "src_node", "dst_node"
              )
            |||,
            'for': c.pairUnreachableFor,
            labels: { kind: 'pair', severity: 'critical', symptom: 'unreachable' },
            annotations: {
              runbook_url: runbook('SkeletonHunterPairUnreachable'),
              dashboard_url: dashboard('fabric', '{{ with $labels.src_tor }}?var-tor={{ . | urlquery }}{{ end }}'),
              summary: 'Skeleton pair {{ $labels.src_node }} -> {{ $labels.dst_node }} gets nothing through',
              description: fold(|||
                Every probe from {{ $labels.src_node }}{{ with $labels.src_tor }} (ToR {{ . }}){{ end }} to
                {{ $labels.dst_node }}{{ with $labels.dst_tor }} (ToR {{ . }}){{ end }} was lost, or every TCP
                dial failed, for over %s. Training traffic between these ranks is
                stalled.
              ||| % inWords(c.pairUnreachableFor)),
              evidence: fold(
                'loss ratio '
                + queried('max(pair:skeletonhunter_probe_loss:ratio_rate1m{src_node=%q,dst_node=%q})', '$labels.src_node $labels.dst_node', ' | humanizePercentage', 'n/a')
                + ',\ndial success '
                + queried('max(pair:skeletonhunter_probe_dial_success:avg1m{src_node=%q,dst_node=%q})', '$labels.src_node $labels.dst_node', ' | humanizePercentage', 'n/a')
              ),
            },
          },
          {
            alert: 'SkeletonHunterPairLoss',
            expr: |||
              label_join(
                max without (protocol) (topology:skeletonhunter_probe_loss:ratio_rate1m) > %(pairLossThreshold)g,
                "component", "->", "src_node", "dst_node"
              )
              unless on (src_node, dst_node) pair:skeletonhunter_probe_unreachable:bool
            ||| % c,
            'for': c.pairLossFor,
            labels: { kind: 'pair', severity: 'warning', symptom: 'loss' },
            annotations: {
              runbook_url: runbook('SkeletonHunterPairLoss'),
              dashboard_url: dashboard('fabric', '{{ with $labels.src_tor }}?var-tor={{ . | urlquery }}{{ end }}'),
              summary: 'Skeleton pair {{ $labels.src_node }} -> {{ $labels.dst_node }} loses {{ $value | humanizePercentage }} of probes',
              description: fold(|||
                Probes from {{ $labels.src_node }}{{ with $labels.src_tor }} (ToR {{ . }}){{ end }} to
                {{ $labels.dst_node }}{{ with $labels.dst_tor }} (ToR {{ . }}){{ end }} lost over %g%% for %s.
              ||| % [c.pairLossThreshold * 100, inWords(c.pairLossFor)]),
              evidence: 'worst protocol loss ratio {{ $value | humanizePercentage }} over the last minute',
            },
          },
        ],
      },
      {
        name: 'skeletonhunter-components',
        rules: [
          {
            // The localizer posts this alert to Alertmanager itself; this rule
            // is the same alert through Prometheus (origin="prometheus"), for
            // setups where the localizer cannot reach Alertmanager. It mirrors
            // the alerts the localizer holds firing
            // (skeletonhunter_component_alerting: the same identity, `symptom`
            // and `severity` included, after confirmation and with the same
            // resolution rule), carries the location labels from the topology,
            // and Alertmanager drops it while the localizer's own copy is
            // active (see alertmanager/alertmanager.yml).
            alert: 'SkeletonHunterComponentFaulty',
            expr: componentOf('tor', l.tor) + 'or\n' + componentOf('spine', l.spine) + 'or\n'
                  + componentOf('node', l.node) + withDetail(|||
                    * on (%(node)s) group_left (%(host)s, %(tor)s, %(spine)s, %(tenant)s)
                      max by (%(node)s, %(host)s, %(tor)s, %(spine)s, %(tenant)s) (
                        %(info)s
                      )
                  ||| % (l { info: topology.nodeInfo(c) }))
                  + 'or\n' + componentOf('host', l.host) + |||
                    or on (kind, id, severity)
                    label_replace(
                      max by (kind, id, symptom, severity) (skeletonhunter_component_alerting) == 1,
                      "component", "$1", "id", "(.*)")
                  |||,
            'for': c.componentFaultyFor,
            labels: { origin: 'prometheus' },
            local blame = 'max(skeletonhunter_component_blame{kind=%q,id=%q})',
            annotations: {
              runbook_url: runbook('SkeletonHunterComponentFaulty') + '-{{ $labels.kind }}',
              dashboard_url: dashboard('fabric'),
              summary: 'SkeletonHunter blames {{ $labels.kind }} {{ $labels.component }} ({{ $labels.symptom }})',
              description: fold(
                |||
                  The SkeletonHunter localizer's tomography marks {{ $labels.kind }}
                  {{ $labels.component }} faulty (estimated failure probability
                |||
                + queried(blame, '$labels.kind $labels.component', ' | humanizePercentage', 'n/a') + ').'
              ),
              evidence: fold(
                'blame ' + queried(blame, '$labels.kind $labels.component', ' | printf "%.3f"', 'n/a')
                + withDetail(';\nunreachable pairs under it '
                  + queried('max(%s:skeletonhunter_probe_unreachable_pairs:count{%s=%q})', '$labels.kind $labels.kind $labels.component', '', '0'))
              ),
            },
          },
        ],
      },
      {
        name: 'skeletonhunter-monitoring',
        rules: [
          {
            alert: 'SkeletonHunterExporterDown',
            // Location labels come from the identity the exporter last reported.
            expr: if !c.pairDetail then |||
              label_replace(up{%(exporterSelector)s} == 0, "component", "$1", "instance", "(.*)")
            ||| % c else |||
              label_replace(
                (up{%(exporterSelector)s} == 0)
                * on (job, instance) group_left (%(node)s, %(host)s, %(tor)s, %(spine)s, %(pod)s, %(tenant)s)
                  topk by (job, instance) (1, last_over_time(skeletonhunter_node_info[%(identityRetention)s]))
                or on (job, instance)
                up{%(exporterSelector)s} == 0,
                "component", "$1", "instance", "(.*)"
              )
            ||| % (c + l),
            'for': c.exporterDownFor,
            labels: { kind: 'exporter', severity: 'warning' },
            annotations: {
              runbook_url: runbook('SkeletonHunterExporterDown'),
              dashboard_url: dashboard('health', '?var-instance={{ $labels.instance | urlquery }}'),
              summary: 'SkeletonHunter exporter {{ $labels.instance }} is down',
              // Without the pair detail the identity is looked up for this
              // alert alone when its text is rendered (one series), not
              // joined from every node's each round.
              local where = if !c.pairDetail then
                '{{ with printf "topk(1, last_over_time(skeletonhunter_node_info{job=%%q,instance=%%q}[%(identityRetention)s]))" $labels.job $labels.instance | query }}'
                % c + '{{ with first . }}host {{ .Labels.%(host)s }}, ToR {{ .Labels.%(tor)s }}{{ end }}' % l
                + '{{ else }}no identity reported in the last %(identityRetention)s{{ end }}' % c
              else 'host {{ $labels.%(host)s }}, ToR {{ $labels.%(tor)s }}' % l,
              description: fold(|||
                Prometheus cannot scrape the exporter at {{ $labels.instance }}
                (%s). Its skeleton pairs
                are not probed and the localizer cannot see them.
              ||| % where),
            },
          },
          {
            alert: 'SkeletonHunterExportersAbsent',
            expr: 'absent(up{%(exporterSelector)s})' % c,
            'for': c.exportersAbsentFor,
            labels: { kind: 'exporter', component: 'all', severity: 'warning' },
            annotations: {
              runbook_url: runbook('SkeletonHunterExportersAbsent'),
              dashboard_url: dashboard('health'),
              summary: 'Prometheus has no %s targets' % jobName(c.exporterSelector),
              description: 'No scrape job named %s exists, or it discovers no targets.' % jobName(c.exporterSelector),
            },
          },
          {
            // A host the topology map lacks probes on, but its pairs have no
            // ToR or spine: the localizer cannot place them.
            alert: 'SkeletonHunterTopologyEntryMissing',
            expr: |||
              label_replace(
                max by (job, instance) (skeletonhunter_identity_source{%(exporterSelector)s, source="missing"}) == 1,
                "component", "$1", "instance", "(.*)"
              )
            ||| % c,
            'for': c.topologyEntryMissingFor,
            labels: { kind: 'exporter', severity: 'warning' },
            annotations: {
              runbook_url: runbook('SkeletonHunterTopologyEntryMissing'),
              dashboard_url: dashboard('health', '?var-instance={{ $labels.instance | urlquery }}'),
              summary: 'SkeletonHunter exporter {{ $labels.instance }} has no entry in the topology map',
              description: fold(|||
                The exporter at {{ $labels.instance }} runs with a topology file
                (identity.topology_file) that has no entry for its host, so its
                ToR, spine, pod or tenant is empty: the localizer cannot place its
                pairs on the fabric. Add the host to the map and reload.
              |||),
            },
          },
          {
            alert: 'SkeletonHunterLocalizerDown',
            expr: |||
              label_replace(up{%(localizerSelector)s} == 0, "component", "$1", "instance", "(.*)")
              or
              label_replace(absent(up{%(localizerSelector)s}), "component", "absent", "", "")
            ||| % c,
            'for': c.localizerDownFor,
            labels: { kind: 'localizer', severity: 'critical' },
            annotations: {
              runbook_url: runbook('SkeletonHunterLocalizerDown'),
              dashboard_url: dashboard('health'),
              summary: 'SkeletonHunter localizer {{ $labels.component }} is down: faults are not localized',
              description: 'Prometheus cannot scrape the localizer (or has no target for it). Component alerts will not fire.',
            },
          },
          {
            alert: 'SkeletonHunterLocalizerStale',
            expr: |||
              label_replace(
                time() - skeletonhunter_localizer_last_success_timestamp_seconds > %(localizerStaleSeconds)g,
                "component", "$1", "instance", "(.*)"
              )
            ||| % c,
            'for': c.localizerStaleFor,
            labels: { kind: 'localizer', severity: 'critical' },
            annotations: {
              runbook_url: runbook('SkeletonHunterLocalizerStale'),
              dashboard_url: dashboard('health'),
              summary: 'SkeletonHunter localizer {{ $labels.component }} has not finished a cycle for {{ $value | humanizeDuration }}',
              description: fold(
                'The localizer runs but its cycles fail (query errors in the last 5m:\n'
                + queried('sum(increase(skeletonhunter_localizer_query_errors_total{instance=%q}[5m]))', '$labels.instance', ' | printf "%.0f"', 'n/a')
                + ').\nCheck that it can reach Prometheus.'
              ),
            },
          },
          {
            alert: 'SkeletonHunterLocalizerQueryErrors',
            expr: |||
              label_replace(
                sum by (job, instance) (rate(skeletonhunter_localizer_query_errors_total[5m])) > 0,
                "component", "$1", "instance", "(.*)"
              )
            |||,
            'for': c.localizerQueryErrorsFor,
            labels: { kind: 'localizer', severity: 'warning' },
            annotations: {
              runbook_url: runbook('SkeletonHunterLocalizerQueryErrors'),
              dashboard_url: dashboard('health'),
              summary: 'SkeletonHunter localizer {{ $labels.component }} keeps failing Prometheus queries',
              description: '{{ $value | printf "%.2f" }} failed queries per second over 5 minutes.',
            },
          },
          {
            alert: 'SkeletonHunterLocalizerBlind',
            // The localizer runs but cannot see (part of) the fabric: its
            // cycles fail, or Prometheus answers for too few of the probe
            // pairs it expects. Alerts it holds neither fire nor resolve for
            // the components it cannot see, so their state is stale.
            expr: |||
              label_replace(
                (
                  skeletonhunter_localizer_pairs_covered
                    < %(localizerBlindCoverage)g * skeletonhunter_localizer_pairs_expected
                )
                or
                (skeletonhunter_localizer_components_unknown > 0),
                "component", "$1", "instance", "(.*)"
              )
            ||| % c,
            'for': c.localizerBlindFor,
            labels: { kind: 'localizer', severity: 'warning' },
            local count(metric) = queried('max(' + metric + '{instance=%q})', '$labels.instance', ' | printf "%.0f"', '?'),
            annotations: {
              runbook_url: runbook('SkeletonHunterLocalizerBlind'),
              dashboard_url: dashboard('health'),
              summary: 'SkeletonHunter localizer {{ $labels.component }} is blind to part of the fabric',
              description: fold(
                'Fresh data for ' + count('skeletonhunter_localizer_pairs_covered') + '\n'
                + 'of ' + count('skeletonhunter_localizer_pairs_expected') + '\n'
                + 'expected probe pairs; ' + count('skeletonhunter_localizer_components_unknown') + '\n'
                + |||
                  component(s) unknown. Their alerts keep their last state (nothing fires or resolves
                  for them) until data is back: check the Prometheus the localizer queries, its scrapes
                  of the exporters, and SkeletonHunterExporterDown.
                |||
              ),
            },
          },
          {
            alert: 'SkeletonHunterLocalizerAlertPostFailing',
            // The localizer queues alerts while an Alertmanager is
            // unreachable and re-sends them; this says the queue is not
            // draining.
            expr: |||
              label_replace(
                sum by (job, instance, alertmanager) (rate(skeletonhunter_localizer_alert_post_errors_total[5m])) > 0
                and on (job, instance, alertmanager)
                max by (job, instance, alertmanager) (skeletonhunter_localizer_alert_queue_length) > 0,
                "component", "$1", "instance", "(.*)"
              )
            |||,
            'for': c.localizerAlertPostFailingFor,
            labels: { kind: 'localizer', severity: 'warning' },
            annotations: {
              runbook_url: runbook('SkeletonHunterLocalizerAlertPostFailing'),
              dashboard_url: dashboard('health'),
              summary: 'SkeletonHunter localizer {{ $labels.component }} cannot post alerts to {{ $labels.alertmanager }}',
              description: fold(
                |||
                  Posting to Alertmanager {{ $labels.alertmanager }} keeps failing; alerts are queued
                |||
                + '(now ' + queried('max(skeletonhunter_localizer_alert_queue_length{instance=%q,alertmanager=%q})', '$labels.instance $labels.alertmanager', ' | printf "%.0f"', '?') + ')\n'
                + 'and re-sent when it is back.'
              ),
            },
          },
          {
            alert: 'SkeletonHunterLocalizerAlertsDropped',
            expr: |||
              label_replace(
                sum by (job, instance, alertmanager) (increase(skeletonhunter_localizer_alerts_dropped_total[%(localizerAlertsDroppedWindow)s])) > 0,
                "component", "$1", "instance", "(.*)"
              )
            ||| % c,
            labels: { kind: 'localizer', severity: 'critical' },
            annotations: {
              runbook_url: runbook('SkeletonHunterLocalizerAlertsDropped'),
              dashboard_url: dashboard('health'),
              summary: 'SkeletonHunter localizer {{ $labels.component }} dropped alerts for {{ $labels.alertmanager }}',
              description: fold(|||
                The localizer's queue for {{ $labels.alertmanager }} overflowed and
                {{ $value | printf "%%.0f" }} alert update(s) were lost in %s:
                Alertmanager may show stale or missing faults. Raise --queue-capacity or fix the path to Alertmanager.
              ||| % inWords(c.localizerAlertsDroppedWindow)),
            },
          },
        ],
      },
    ]),
  },
}
