// The SkeletonHunter monitoring mixin: recording rules, alerts and Grafana
// dashboards, configured by `_config` (config.libsonnet). `render.jsonnet`
// turns it into the files shipped in rules/ and dashboards/.
(import 'config.libsonnet')
+ (import 'rules/rules.libsonnet')
+ (import 'alerts/alerts.libsonnet')
+ (import 'dashboards/dashboards.libsonnet')
