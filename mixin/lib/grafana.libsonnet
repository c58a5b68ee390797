// Small builders for the Grafana JSON the dashboards share: panels, query
// targets, thresholds, template variables and the dashboard around them.
// Plain jsonnet, no grafonnet: nothing to download.
local ds = { type: 'prometheus', uid: '${datasource}' };
local panelNames = {
  heatmap: 'Heatmap',
  stat: 'Stat',
  'state-timeline': 'State timeline',
  'status-history': 'Status history',
  table: 'Table',
  timeseries: 'Time series',
};

{
  // A label matcher on a dashboard variable: `label=~"$var"`.
  match(label, variable=label):: '%s=~"$%s"' % [label, variable],

  pos(x, y, w, h):: { h: h, w: w, x: x, y: y },

  // A range query, one series per legend.
  target(expr, legend=''):: { expr: expr, legendFormat: legend, range: true, datasource: ds },
  // An instant query (stat and table panels).
  instant(expr, legend='', format='time_series'):: {
    expr: expr,
    legendFormat: legend,
    instant: true,
    range: false,
    format: format,
    datasource: ds,
  },
  // An instant query as a table.
  tableTarget(expr):: self.instant(expr, format='table'),

  // Absolute thresholds: `base` below the first step, then [color, value] steps.
  thresholds(base, steps=[]):: {
    mode: 'absolute',
    steps: [{ color: base, value: null }] + [{ color: s[0], value: s[1] } for s in steps],
  },
  // Green, then yellow, orange, red at the loss ratios of `steps`.
  lossThresholds(steps):: self.thresholds('green', std.mapWithIndex(
    function(i, v) [['yellow', 'orange', 'red'][i], v], steps
  )),
  // Value texts of a 0/1 series.
  binaryMappings(zero, one):: [{ type: 'value', options: { '0': { text: zero }, '1': { text: one } } }],

  // A panel; its targets get refIds A, B, ... in order. Every panel says
  // what it shows (`description`, the (i) tooltip) and in which unit.
  panel(type, title, pos, targets, description='', defaults={}, options={}, overrides=[])::
    assert description != '' : 'panel %s: no description' % title;
    assert std.objectHas(defaults, 'unit') : 'panel %s: no unit' % title;
    {
      type: type,
      title: title,
      description: description,
      datasource: ds,
      gridPos: pos,
      targets: std.mapWithIndex(function(i, t) t { refId: std.char(65 + i) }, targets),
      fieldConfig: { defaults: defaults, overrides: overrides },
      options: options,
    },

  // A single big number, coloured by `thresholds`.
  stat(title, pos, target, thresholds, unit=null, description=''):: self.panel(
    'stat', title, pos, [target], description,
    defaults=(if unit == null then {} else { unit: unit }) + { thresholds: thresholds },
    options={
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'background',
      graphMode: 'area',
      textMode: 'auto',
    },
  ),

  // Every series named by its legend; the legend a table with each
  // series' last and largest value, largest first.
  timeseries(title, pos, targets, unit=null, description='', overrides=[], defaults={}):: self.panel(
    'timeseries', title, pos, targets, description,
    defaults=(if unit == null then {} else { unit: unit }) + defaults,
    overrides=overrides,
    options={
      legend: { showLegend: true, displayMode: 'table', placement: 'bottom', calcs: ['lastNotNull', 'max'], sortBy: 'Max', sortDesc: true },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
  ),

  // The `n` largest of a per-pair query: per-pair panels never draw every
  // pair of a large fleet.
  topk(n, expr):: 'topk(%d, %s)' % [n, expr],

  table(title, pos, targets, transformations, description='', defaults={}):: self.panel(
    'table', title, pos, targets, description, defaults=defaults,
  ) + { transformations: transformations },

  // One coloured band per series: `mappings` name the values.
  stateTimeline(title, pos, target, thresholds, mappings, description=''):: self.panel(
    'state-timeline', title, pos, [target], description,
    defaults={ unit: 'none', thresholds: thresholds, mappings: mappings },
    options={ showValue: 'never', mergeValues: true },
  ),

  row(title, y):: { type: 'row', title: title, collapsed: false, gridPos: $.pos(0, y, 24, 1), panels: [] },

  // Table transformations.
  hide(fields):: { id: 'organize', options: { excludeByName: { [f]: true for f in fields } } },
  // A src x dst matrix of a pair table's Value.
  pairMatrix:: {
    id: 'groupingToMatrix',
    options: { rowField: 'src_node', columnField: 'dst_node', valueField: 'Value', emptyValue: 'null' },
  },

  // A template variable from label_values(); `all` adds "All" (= `allValue`).
  variable(name, label, query, all=true, allValue='.*'):: {
    name: name,
    label: label,
    type: 'query',
    datasource: ds,
    query: { query: query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    definition: query,
    refresh: 2,
    sort: 1,
    multi: all,
    includeAll: all,
    current: if all then { selected: true, text: ['All'], value: ['$__all'] } else {},
    options: [],
    hide: 0,
    regex: '',
  } + (if all && allValue != null then { allValue: allValue } else {}),

  // A dashboard of `panels` (ids given in order) for `c` (the mixin's
  // _config): the data source input and variable, the firing SkeletonHunter
  // alerts as annotations, a menu of the other SkeletonHunter dashboards, and
  // __requires listing the panel types used.
  dashboard(c, key, title, description, tags, variables, panels):: {
    local input = c.datasourceInput,
    local types = std.set([p.type for p in panels if p.type != 'row']),
    __inputs: [{
      name: input,
      label: 'Prometheus',
      description: 'Any Prometheus-API data source (Prometheus, VictoriaMetrics, Thanos, Mimir) holding the series of the exporters and the localizer',
      type: 'datasource',
      pluginId: 'prometheus',
      pluginName: 'Prometheus',
    }],
    __requires: [
      { type: 'grafana', id: 'grafana', name: 'Grafana', version: '10.0.0' },
      { type: 'datasource', id: 'prometheus', name: 'Prometheus', version: '1.0.0' },
    ] + [{ type: 'panel', id: t, name: panelNames[t], version: '' } for t in types],
    uid: c.dashboardUids[key],
    title: c.dashboardTitlePrefix + title,
    description: description,
    tags: c.dashboardTags + tags,
    editable: true,
    graphTooltip: 1,
    schemaVersion: 38,
    version: 1,
    time: { from: c.dashboardTimeFrom, to: 'now' },
    refresh: c.dashboardRefresh,
    timezone: '',
    templating: {
      list: [{
        name: 'datasource',
        label: 'Prometheus',
        type: 'datasource',
        query: 'prometheus',
        current: { selected: false, text: '${%s}' % input, value: '${%s}' % input },
        hide: 0,
        refresh: 1,
        options: [],
        regex: '',
      }] + variables,
    },
    annotations: {
      list: [
        {
          builtIn: 1,
          datasource: { type: 'grafana', uid: '-- Grafana --' },
          enable: true,
          hide: true,
          iconColor: 'rgba(0, 211, 255, 1)',
          name: 'Annotations & Alerts',
          type: 'dashboard',
        },
        {
          datasource: ds,
          enable: true,
          iconColor: 'red',
          name: 'SkeletonHunter alerts',
          expr: 'ALERTS{cluster=~"$cluster", alertname=~"SkeletonHunter.*", alertstate="firing"}',
          step: '30s',
          titleFormat: '{{alertname}} {{kind}} {{component}}',
          textFormat: '{{symptom}}',
          useValueForTime: false,
        },
      ],
    },
    links: [{ title: 'SkeletonHunter', type: 'dashboards', tags: c.dashboardTags[0:1], asDropdown: true }],
    panels: std.mapWithIndex(function(i, p) p { id: i + 1 }, panels),
  },
}
