//! The command line; every flag also reads an environment variable
//! (Kubernetes downward-API style).

use clap::Parser;
use skeletonhunter_common::build::VERSION_TEXT;
use skeletonhunter_common::logging::LogArgs;
use std::path::PathBuf;

/// Command line; every flag also reads an environment variable.
#[derive(Debug, Clone, Parser, Default)]
#[command(
    name = "skeletonhunter-exporter",
    version = VERSION_TEXT,
    about = "Probe this host's skeleton peers (UDP echo, TCP dial, ICMP, RDMA UD) and serve /metrics.",
    long_about = "Probe this host's skeleton peers (UDP echo, TCP dial, ICMP, RDMA UD) and serve /metrics.\n\n\
Settings come from the YAML file (-c), overridden by environment variables (Kubernetes \
downward-API style), overridden by flags. See exporter/config.example.yaml and docs/exporter.md."
)]
pub struct Args {
    /// YAML configuration file (see config.example.yaml).
    #[arg(long, short = 'c', env = "SKELETONHUNTER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address of the HTTP server (metrics, landing page, health,
    /// reload, path tracing). Default 0.0.0.0:9465.
    #[arg(
        long = "web.listen-address",
        env = "SKELETONHUNTER_LISTEN",
        value_name = "ADDR"
    )]
    pub web_listen_address: Option<String>,
    /// Deprecated: --web.listen-address.
    #[arg(long = "listen", hide = true, conflicts_with = "web_listen_address")]
    pub listen: Option<String>,
    /// Path under which metrics are served. Default /metrics.
    #[arg(
        long = "web.telemetry-path",
        env = "SKELETONHUNTER_TELEMETRY_PATH",
        value_name = "PATH"
    )]
    pub web_telemetry_path: Option<String>,
    /// UDP echo responder bind address ("off" disables it).
    #[arg(long, env = "SKELETONHUNTER_UDP_LISTEN")]
    pub udp_listen: Option<String>,
    /// TCP dial acceptor bind address ("off" disables it).
    #[arg(long, env = "SKELETONHUNTER_TCP_LISTEN")]
    pub tcp_listen: Option<String>,
    /// This exporter's node (training container) name. Default: hostname.
    #[arg(long, env = "SKELETONHUNTER_NODE")]
    pub node: Option<String>,
    /// NIC / RNIC address. Default: the address of the default route.
    #[arg(long, env = "SKELETONHUNTER_NIC")]
    pub nic: Option<String>,
    /// Physical host. Default: hostname.
    #[arg(long, env = "SKELETONHUNTER_HOST")]
    pub host: Option<String>,
    /// Top-of-rack switch.
    #[arg(long, env = "SKELETONHUNTER_TOR")]
    pub tor: Option<String>,
    /// Spine / aggregation block.
    #[arg(long, env = "SKELETONHUNTER_SPINE")]
    pub spine: Option<String>,
    /// Network pod.
    #[arg(long, env = "SKELETONHUNTER_POD")]
    pub pod: Option<String>,
    /// Tenant / job.
    #[arg(long, env = "SKELETONHUNTER_TENANT")]
    pub tenant: Option<String>,
    /// Topology map: a YAML file `hosts: {HOST: {tor, spine, pod, tenant,
    /// nic}}` that fills the identity fields left empty, looked up by the
    /// host name (identity.topology_file).
    #[arg(long, env = "SKELETONHUNTER_TOPOLOGY_FILE", value_name = "FILE")]
    pub topology_file: Option<PathBuf>,
    /// Probe interval per peer and protocol (e.g. 1s, 200ms).
    #[arg(long, env = "SKELETONHUNTER_INTERVAL")]
    pub interval: Option<String>,
    /// Time after which a probe counts as lost.
    #[arg(long, env = "SKELETONHUNTER_TIMEOUT")]
    pub timeout: Option<String>,
    /// Comma-separated protocols: udp,tcp,icmp,rdma. Default: udp,tcp plus
    /// rdma when built in (it turns itself off without an RDMA device).
    #[arg(long, env = "SKELETONHUNTER_PROTOCOLS")]
    pub protocols: Option<String>,
    /// Comma-separated static peers: ADDR[:UDPPORT][=NAME].
    #[arg(long, env = "SKELETONHUNTER_PEERS")]
    pub peers: Option<String>,
    /// Headless-service DNS name to resolve for peers (A/AAAA, or SRV
    /// when prefixed with srv:).
    #[arg(long, env = "SKELETONHUNTER_DNS")]
    pub dns: Option<String>,
    /// Peer list file for ToR-mesh mode.
    #[arg(long, env = "SKELETONHUNTER_TOR_MESH_FILE")]
    pub tor_mesh_file: Option<PathBuf>,
    /// Most HTTP connections open at once (`/metrics`, `/healthz`, ...);
    /// lowered to a quarter of the open-file limit. Default 256.
    #[arg(long, env = "SKELETONHUNTER_HTTP_MAX_CONNECTIONS")]
    pub http_max_connections: Option<usize>,
    /// Most HTTP requests answered at once. Default 16.
    #[arg(long, env = "SKELETONHUNTER_HTTP_MAX_IN_FLIGHT")]
    pub http_max_in_flight: Option<usize>,
    /// Time a client has to send its request headers; a connection idle
    /// that long is closed. Default 10s.
    #[arg(long, env = "SKELETONHUNTER_HTTP_HEADER_TIMEOUT")]
    pub http_header_timeout: Option<String>,
    /// Web configuration (exporter-toolkit format: TLS, client certificates,
    /// basic auth, headers, rate limit) for the HTTP server; re-read when it
    /// or a certificate it names changes. See docs/operations.md.
    #[arg(
        long = "web.config.file",
        env = "SKELETONHUNTER_WEB_CONFIG_FILE",
        value_name = "FILE"
    )]
    pub web_config_file: Option<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub log: LogArgs,
    /// Validate the configuration, print a summary of it, and exit (0; 2
    /// when it does not load).
    #[arg(long)]
    pub check_config: bool,
}

impl Args {
    /// The HTTP address from the flags (`--web.listen-address`, or the
    /// deprecated `--listen`).
    pub fn listen_address(&self) -> Option<&str> {
        self.web_listen_address
            .as_deref()
            .or(self.listen.as_deref())
    }

    /// The deprecated flags given, as (old, new) names, for one warning
    /// each at start.
    pub fn deprecated_flags(&self) -> Vec<(&'static str, &'static str)> {
        let mut v = Vec::new();
        if self.listen.is_some() {
            v.push(("--listen", "--web.listen-address"));
        }
        v.extend(self.log.deprecated_flag());
        v
    }
}
