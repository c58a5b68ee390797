// Is the monitoring itself working: exporters scraped and probing, peers
// discovered, the localizer cycling and posting alerts. Alerts about the
// exporters and the localizer link here.
local g = import '../lib/grafana.libsonnet';

function(c)
  local common = (import 'common.libsonnet')(c);
  local v = common.variables;
  local l = c.labels;
  local cl = common.cluster;
  // Raw series of the chosen exporters.
  local ex = common.exporters + ', ' + g.match('instance');
  // rate() of an exporter counter summed by `by`, as a legend-labelled target.
  local exRate(by, metric, legend) =
    g.target('sum by (%s) (rate(%s{%s}[$__rate_interval]))' % [by, metric, ex], legend);
  // The same for a localizer counter.
  local locRate(by, metric, legend) =
    g.target('sum by (%s) (rate(%s{%s}[$__rate_interval]))' % [by, metric, cl], legend);
  local upDown = g.thresholds('red', [['green', 1]]);
  local scrape(title, pos, selector, description) =
    g.stateTimeline(title, pos, g.target('up{%s}' % selector, '{{instance}}'), upDown, g.binaryMappings('DOWN', 'up'), description);

  g.dashboard(
    c,
    'health',
    'Exporter and localizer health',
    'Is the monitoring itself working: exporters scraped and probing, peers discovered, the localizer cycling and posting alerts.',
    ['monitoring'],
    [v.cluster, v.job, v.instance],
    [
      g.row('Exporters', 0),
      scrape('Exporter scrape', g.pos(0, 1, 12, 8), ex,
             "Prometheus' scrape of each exporter: red while it fails, so the exporter's pairs have no fresh data."),
      g.timeseries('Probes sent per second', g.pos(12, 1, 12, 8),
                   [exRate('instance, protocol', 'skeletonhunter_probe_sent_total', '{{instance}} {{protocol}}')], 'ops',
                   'Probes each exporter sends per second, by protocol: a drop to 0 is an exporter that stopped probing.'),
      g.timeseries('Skeleton peers by discovery source', g.pos(0, 9, 8, 8),
                   [g.target('sum by (source) (skeletonhunter_skeleton_peers{%s})' % ex, '{{source}}')], 'short',
                   'Peers the exporters probe, by how they were found (configuration, eBPF discovery, RDMA).'),
      g.timeseries('Probe errors (not loss)', g.pos(8, 9, 8, 8),
                   [exRate('protocol, reason', 'skeletonhunter_probe_errors_total', '{{protocol}} {{reason}}')], 'ops',
                   'Probes that could not be sent or read (socket errors, permissions), per second: not network loss, a problem of the exporter.'),
      g.timeseries('Discovery events', g.pos(16, 9, 8, 8), [
        exRate('source, event', 'skeletonhunter_discovery_events_total', '{{source}} {{event}}'),
        exRate('source', 'skeletonhunter_discovery_dropped_events_total', 'dropped {{source}}'),
      ], 'ops', 'Connection events the discovery sources report per second, and events dropped (a full ring buffer).'),
      g.timeseries('Responder', g.pos(0, 17, 8, 8), [
        exRate('protocol', 'skeletonhunter_responder_replies_total', 'replies {{protocol}}'),
        exRate('reason', 'skeletonhunter_responder_dropped_total', 'dropped {{reason}}'),
      ], 'ops', "Replies of the exporters' probe responders per second, and requests they refused or dropped, by reason."),
      g.timeseries('Scrape duration and size', g.pos(8, 17, 8, 8), [
        g.target('scrape_duration_seconds{%s}' % ex, '{{instance}} duration'),
        g.target('scrape_samples_scraped{%s}' % ex, '{{instance}} samples'),
      ], 's', 'How long Prometheus takes to scrape each exporter (left axis) and how many samples it gets (right axis).', overrides=[{
        matcher: { id: 'byRegexp', options: '.*samples' },
        properties: [{ id: 'unit', value: 'short' }, { id: 'custom.axisPlacement', value: 'right' }],
      }]),
      g.table('Exporter builds and identities', g.pos(16, 17, 8, 8), [
        g.tableTarget('max by (instance, version) (skeletonhunter_build_info{%s})' % ex),
        g.tableTarget('max by (instance, %s, %s, %s, %s, %s) (skeletonhunter_node_info{%s})'
                      % [l.node, l.host, l.tor, l.spine, l.tenant, ex]),
      ], [{ id: 'merge', options: {} }, g.hide(['Time', 'Value #A', 'Value #B'])],
      'Version and identity (node, host, ToR, spine, tenant) each exporter reports: a wrong or empty ToR here misplaces its pairs.',
      defaults={ unit: 'none' }),

      g.row('Localizer', 25),
      g.stat('Since last successful cycle', g.pos(0, 26, 6, 6),
             g.instant('time() - max by (instance) (skeletonhunter_localizer_last_success_timestamp_seconds{%s})' % cl, '{{instance}}'),
             g.thresholds('green', [['orange', c.localizerStaleSeconds / 2], ['red', c.localizerStaleSeconds]]), 's',
             'Seconds since each localizer last finished a cycle; above %d s it is stale and alerts stop being refreshed.' % c.localizerStaleSeconds),
      g.timeseries('Cycle duration', g.pos(6, 26, 9, 6), [
        g.target('histogram_quantile(0.99, sum by (instance, le) (rate(skeletonhunter_localizer_cycle_duration_seconds_bucket{%s}[$__rate_interval])))' % cl, 'p99 {{instance}}'),
        g.target('max by (instance) (skeletonhunter_localizer_analysis_duration_seconds{%s})' % cl, 'analysis {{instance}}'),
      ], 's', "99th percentile of a localizer cycle (queries and analysis) and the last analysis alone; a cycle longer than the localizer's --interval delays verdicts."),
      g.timeseries('Cycles and query errors', g.pos(15, 26, 9, 6), [
        locRate('result', 'skeletonhunter_localizer_cycles_total', 'cycles {{result}}'),
        locRate('query, reason', 'skeletonhunter_localizer_query_errors_total', 'error {{query}} {{reason}}'),
      ], 'ops', 'Localizer cycles per second by result, and failed Prometheus queries by query and reason.'),
      g.timeseries('Pairs seen by the localizer', g.pos(0, 32, 8, 7), [
        g.target('max(skeletonhunter_localizer_%s{%s})' % [m[0], cl], m[1])
        for m in [['pairs_observed', 'observed'], ['pairs_anomalous', 'anomalous'], ['nodes', 'nodes']]
      ], 'short', 'Pairs with data in the last cycle, those the localizer found anomalous, and the nodes it knows.'),
      g.timeseries('Alerts to Alertmanager', g.pos(8, 32, 8, 7), [
        g.target('max(skeletonhunter_localizer_alerts_firing{%s})' % cl, 'firing'),
        locRate('alertmanager', 'skeletonhunter_localizer_alerts_posted_total', 'posted/s {{alertmanager}}'),
        locRate('alertmanager', 'skeletonhunter_localizer_alert_post_errors_total', 'post errors/s {{alertmanager}}'),
        g.target('max by (alertmanager) (skeletonhunter_localizer_alert_queue_length{%s})' % cl, 'queued {{alertmanager}}'),
      ], 'short', 'Alerts the localizer keeps firing, posts and post errors per second per Alertmanager, and alerts queued while one is unreachable.'),
      scrape('Localizer scrape', g.pos(16, 32, 8, 7), cl + ', ' + c.localizerSelector,
             "Prometheus' scrape of each localizer replica: red while it fails."),
    ],
  )
