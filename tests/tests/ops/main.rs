//! What operators deploy, checked by the real tools and servers: the
//! shipped rules, Alertmanager config, dashboards, mixin, Kubernetes and
//! systemd files, the image, a kube-prometheus installation, exporter
//! conventions and web security. One test binary; a module per concern.

mod alerting;
mod alertmanager;
mod availability;
mod collisions;
mod config;
mod conventions;
mod dashboards;
mod dashboards_sdk;
mod deploy;
mod image;
mod kube_prometheus;
mod mixin;
mod native_rules;
mod topology;
mod web_security;
