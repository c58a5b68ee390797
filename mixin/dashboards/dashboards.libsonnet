// The Grafana dashboards, by file name (the monitoring-mixin convention).
{
  grafanaDashboards+:: {
    'skeletonhunter-fabric.json': (import 'fabric.libsonnet')($._config),
    'skeletonhunter-health.json': (import 'health.libsonnet')($._config),
    'skeletonhunter-tenant.json': (import 'tenant.libsonnet')($._config),
  },
}
