//! `skeletonhunter-localizer run`: the online localizer's flags.

use super::flags::{
    endpoint_config, parse_pair_shards, parse_ratio, parse_size, positive_count, positive_duration,
    BadInput, EngineArgs, HistogramsArg, PairShards,
};
use crate::clients::dns::ServerUrl;
use crate::clients::Endpoint;
use crate::online::{self, Settings};
use skeletonhunter_common::logging::LogArgs;
use skeletonhunter_common::web::{WebConfigError, WebSource};
use skeletonhunter_common::Protocol;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Flags of `skeletonhunter-localizer run`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    about = "Localize faults online: query Prometheus every cycle, alert via Alertmanager, serve blame metrics",
    long_about = "Every --interval, query the Prometheus HTTP API (Prometheus, VictoriaMetrics, Thanos, Mimir) for \
per-pair probe loss, dial failures and RTT over --window and for skeletonhunter_node_info topology, run the \
tomography engine, and post component alerts (alertname SkeletonHunterComponentFaulty) to every --alertmanager, \
re-posting them while active and resolving them when the fault clears. A cycle with unreachable Prometheus or \
partial data raises and clears nothing; it is logged and counted. Blame and health metrics are served on \
--web.listen-address."
)]
pub struct RunArgs {
    /// Prometheus-compatible API root, e.g. http://prometheus:9090 (VictoriaMetrics: http://vm:8428).
    #[arg(long, env = "SKELETONHUNTER_PROMETHEUS", value_name = "URL")]
    pub prometheus: String,
    /// TLS and credentials for --prometheus: a YAML file in the shape of Prometheus' http_config
    /// (tls_config, basic_auth, authorization, bearer_token_file), as promtool's --http.config.file.
    #[arg(long = "prometheus.http-config-file", value_name = "FILE")]
    pub prometheus_http_config: Option<PathBuf>,
    /// Alertmanager root, e.g. http://alertmanager:9093; repeat for an HA cluster (each gets every alert), or
    /// give dns+http://NAME:PORT to post to every address NAME resolves to, looked up again each cycle
    /// (a headless Service such as alertmanager-operated).
    /// Without any, the localizer only serves metrics.
    #[arg(
        long,
        env = "SKELETONHUNTER_ALERTMANAGER",
        value_name = "URL",
        value_delimiter = ','
    )]
    pub alertmanager: Vec<String>,
    /// TLS and credentials for every --alertmanager, in the same format as
    /// --prometheus.http-config-file.
    #[arg(long = "alertmanager.http-config-file", value_name = "FILE")]
    pub alertmanager_http_config: Option<PathBuf>,
    /// Address of the HTTP server (the status page at /, metrics, /report, health, reload).
    /// Default 0.0.0.0:9479.
    #[arg(long = "web.listen-address", value_name = "ADDR")]
    pub web_listen_address: Option<SocketAddr>,
    /// Deprecated: --web.listen-address.
    #[arg(long = "listen", hide = true, conflicts_with = "web_listen_address")]
    pub listen: Option<SocketAddr>,
    /// Path under which metrics are served.
    #[arg(long = "web.telemetry-path", default_value = "/metrics", value_name = "PATH",
          value_parser = telemetry_path)]
    pub web_telemetry_path: String,
    /// Web configuration (exporter-toolkit format: TLS, client certificates, basic auth,
    /// headers, rate limit) for the HTTP server; re-read when it or a certificate changes.
    #[arg(long = "web.config.file", env = "SKELETONHUNTER_WEB_CONFIG_FILE", value_name = "FILE",
          value_parser = open_web_config)]
    pub web_config_file: Option<Arc<WebSource>>,
    /// Time between cycles (e.g. 5s, 500ms, 1m). The default pages a fault within about 30 s
    /// of a 15s scrape; a fleet whose cycle takes longer is sharded (--pair-shards auto).
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Range of the per-pair aggregates (PromQL increase() window); cover at least two scrapes.
    #[arg(long, default_value = "1m", value_parser = positive_duration, value_name = "DURATION")]
    pub window: Duration,
    /// How far back to look for a node's skeletonhunter_node_info, so a node whose exporter went dark
    /// (e.g. an unreachable container) keeps its place in the topology.
    #[arg(long, default_value = "1h", value_parser = positive_duration, value_name = "DURATION")]
    pub topology_window: Duration,
    /// How long node identities read from skeletonhunter_node_info are reused before they are
    /// queried again (two queries over every node, a fifth of a cycle's cost at scale), between
    /// cycles so no cycle waits for them; a cycle that finds a pair endpoint missing from them
    /// has them queried again right after it.
    #[arg(long, default_value = "1m", value_parser = positive_duration, value_name = "DURATION")]
    pub topology_refresh: Duration,
    /// Split the per-pair queries into up to N shards by source node and read one shard per
    /// cycle, reusing the others' latest answers: the store reads each pair every N cycles
    /// instead of every cycle. For fleets where those queries take most of --interval; set N to
    /// about --scrape-interval / --interval, since a pair's series change once per scrape, or
    /// `auto` (the default) for exactly that (rounded down, at least 1), used once the fleet has
    /// 4096 node identities: smaller fleets read every pair every cycle. Data of a verdict is then
    /// up to N-1 cycles older, and --confirm-cycles counts N-1 more cycles while N shards are in
    /// use. At most 64.
    #[arg(long, default_value = "auto", value_parser = parse_pair_shards, value_name = "N|auto")]
    pub pair_shards: PairShards,
    /// Timeout of each HTTP request to Alertmanager and of connecting to Prometheus (at most 5s
    /// of it); Prometheus queries are bounded by --query.timeout.
    #[arg(long, default_value = "5s", value_parser = positive_duration, value_name = "DURATION")]
    pub timeout: Duration,
    /// Bound of each Prometheus query, also sent to the store (the API's timeout parameter) so it
    /// stops evaluating what the localizer gave up on. Default: the larger of twice --interval and
    /// --timeout (a cycle's queries run concurrently, so each may use the cycle's whole budget,
    /// and a slow cycle only delays the next: cycles never overlap).
    #[arg(long = "query.timeout", value_parser = positive_duration, value_name = "DURATION")]
    pub query_timeout: Option<Duration>,
    /// Which RTT histogram series are read: classic (_bucket/_count, 25 series a pair), native
    /// (one native-histogram series a pair; needs a store with native histograms), or auto: ask
    /// the store before the first cycle whether it evaluates histogram_count, then read native
    /// where a pair has it and classic elsewhere, or classic alone when it does not.
    #[arg(long, value_enum, default_value_t = HistogramsArg::Auto, value_name = "MODE")]
    pub histograms: HistogramsArg,
    /// Largest Prometheus answer read (e.g. 64MiB, 500MB); a longer one fails that query
    /// (reason "too_large") and the cycle, instead of exhausting memory.
    #[arg(long, default_value = "64MiB", value_parser = parse_size, value_name = "SIZE")]
    pub max_response_size: usize,
    /// Most bytes of Prometheus answers held at once. A cycle sends all its queries together, so
    /// this, not --max-response-size alone, bounds their memory; a query whose answer would pass
    /// it fails (reason "too_large") and the cycle with it. Default: 4 x --max-response-size (256MiB).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub max_cycle_response_size: Option<usize>,
    /// How long Alertmanager keeps a firing alert without a re-post (its endsAt); default 4 x --interval,
    /// at least 30s. Bounds how long an alert outlives a dead localizer.
    #[arg(long, value_parser = positive_duration, value_name = "DURATION")]
    pub alert_ttl: Option<Duration>,
    /// Packet-probe protocols whose sent/lost counters and RTT histograms are analyzed
    /// (tcp series are dial attempts and always used for the unreachable test).
    #[arg(long = "protocol", default_values = ["udp", "icmp", "rdma"], value_delimiter = ',', value_name = "PROTO")]
    pub protocols: Vec<Protocol>,
    /// Extra PromQL label matchers added to every query, e.g. 'job="skeletonhunter"'.
    #[arg(long, value_name = "MATCHERS")]
    pub matchers: Option<String>,
    /// generatorURL of the alerts (e.g. a Grafana dashboard link).
    #[arg(long, default_value = "", value_name = "URL")]
    pub external_url: String,
    /// Where operators read docs/runbooks.md (an http(s) URL, no #fragment): each alert's
    /// runbook_url annotation is this plus the anchor of its section. Point it at your own copy
    /// (a wiki, an internal Git host) to match the version you run.
    #[arg(long, default_value = crate::online::alerts::DEFAULT_RUNBOOK_URL, value_name = "URL",
          value_parser = runbook_url)]
    pub runbook_url: String,
    /// Grafana root, e.g. https://grafana.example.com: each alert's dashboard_url annotation is
    /// this plus /d/<uid> of the dashboard. Empty: the bare path /d/<uid>, as the rules' alerts carry.
    #[arg(long, default_value = "", value_name = "URL", value_parser = grafana_url)]
    pub grafana_url: String,
    /// Resolved alerts kept per Alertmanager while it is unreachable.
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = positive_count)]
    pub queue_capacity: usize,
    /// A component not alerting yet fires only when reported in this many consecutive cycles
    /// (1: at once). Partial evidence at the start of a fault lasts about a scrape interval.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100), value_name = "N")]
    pub confirm_cycles: u32,
    /// An alerting component resolves only after this many consecutive cycles in which it was
    /// covered (see --min-coverage) and not reported; cycles without enough data do not count.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100), value_name = "N")]
    pub resolve_cycles: u32,
    /// A component whose alert fires and resolves (after --confirm-cycles and --resolve-cycles)
    /// this many times in all within --flap-window-cycles is flapping: it gets one alert with
    /// symptom="flapping", held through its healthy spells, instead of a page per outage.
    /// 3 = an outage, its end and its return; 0 turns flap detection off.
    #[arg(long, default_value_t = 3, value_parser = flap_transitions, value_name = "N")]
    pub flap_transitions: u32,
    /// Cycles over which --flap-transitions are counted; a flapping component's alert resolves
    /// after --resolve-cycles, then this many covered cycles without a fault.
    /// The default, 60 cycles of the default 5s --interval, catches outages that return within
    /// about five minutes.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=10_000), value_name = "N")]
    pub flap_window_cycles: u32,
    /// Fraction (0.01-1) of a component's expected pairs that need fresh data in a cycle for
    /// its alert to fire or resolve; below it the component is unknown and keeps its state.
    #[arg(long, default_value_t = 0.5, value_parser = parse_ratio, value_name = "RATIO")]
    pub min_coverage: f64,
    /// Prometheus' scrape interval of the exporters: the margin for staggered scrapes. A new
    /// finding whose evidence lies mostly on pairs of a component that cleared less than
    /// --window + this ago is held until then (it may be that fault's leftovers).
    #[arg(long, default_value = "15s", value_parser = positive_duration, value_name = "DURATION")]
    pub scrape_interval: Duration,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub engine: EngineArgs,
    /// Run one cycle, print its report as JSON on stdout and exit (non-zero when the data was unusable).
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub log: LogArgs,
}

/// Default of `--web.listen-address`.
const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 9479);

impl RunArgs {
    /// The deprecated flags given, as (old, new) names, for one warning each.
    pub fn deprecated_flags(&self) -> Vec<(&'static str, &'static str)> {
        let mut v = Vec::new();
        if self.listen.is_some() {
            v.push(("--listen", "--web.listen-address"));
        }
        v.extend(self.log.deprecated_flag());
        v
    }
}

/// `--web.telemetry-path`: an absolute path no other endpoint uses.
fn telemetry_path(p: &str) -> Result<String, String> {
    if !p.starts_with('/') || p.contains(['?', '#', ' ']) {
        return Err(format!("{p:?} is not an absolute URL path (e.g. /metrics)"));
    }
    if [
        "/",
        "/report",
        "/-/healthy",
        "/-/ready",
        "/-/reload",
        "/healthz",
    ]
    .contains(&p)
    {
        return Err(format!("{p:?} is already an endpoint of the localizer"));
    }
    Ok(p.to_string())
}

/// Entry point of `skeletonhunter-localizer run` (logging is set up by the
/// caller from `--log-level`).
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    check_args(&args)?;
    let settings = settings(args)?;
    check_endpoints(&settings)?;
    online::run(settings)?;
    Ok(())
}

/// Every endpoint built once before the loop starts, so a URL or http
/// config it cannot serve is refused at start (exit 2), never every cycle.
fn check_endpoints(s: &Settings) -> Result<(), BadInput> {
    Endpoint::check(&s.prometheus, s.timeout, &s.prometheus_http)
        .map_err(|e| BadInput(format!("--prometheus: {e}")))?;
    for am in &s.alertmanagers {
        let url = ServerUrl::parse(am).map_err(|e| BadInput(format!("--alertmanager: {e}")))?;
        Endpoint::check(url.url(), s.timeout, &s.alertmanager_http)
            .map_err(|e| BadInput(format!("--alertmanager: {e}")))?;
    }
    Ok(())
}

fn settings(args: RunArgs) -> Result<Settings, BadInput> {
    Ok(Settings {
        engine: args.engine.config(),
        prometheus_http: endpoint_config(
            "--prometheus.http-config-file",
            args.prometheus_http_config.as_deref(),
        )?,
        alertmanager_http: endpoint_config(
            "--alertmanager.http-config-file",
            args.alertmanager_http_config.as_deref(),
        )?,
        prometheus: args.prometheus,
        alertmanagers: args.alertmanager,
        listen: args
            .web_listen_address
            .or(args.listen)
            .unwrap_or(DEFAULT_LISTEN),
        telemetry_path: args.web_telemetry_path,
        web: args.web_config_file,
        interval: args.interval,
        window: args.window,
        topology_window: args.topology_window,
        topology_refresh: args.topology_refresh,
        pair_shards: args.pair_shards.count(args.interval, args.scrape_interval),
        pair_shards_min_nodes: args.pair_shards.min_nodes(),
        timeout: args.timeout,
        query_timeout: args.query_timeout,
        histograms: args.histograms.run_form(),
        max_response: args.max_response_size,
        max_cycle_response: args
            .max_cycle_response_size
            .unwrap_or(args.max_response_size.saturating_mul(4)),
        alert_ttl: args.alert_ttl,
        protocols: args.protocols,
        matchers: args.matchers,
        external_url: args.external_url,
        runbook_url: args.runbook_url,
        grafana_url: args.grafana_url,
        queue_capacity: args.queue_capacity,
        confirm_cycles: args.confirm_cycles,
        scrape_interval: args.scrape_interval,
        resolve_cycles: args.resolve_cycles,
        flap_transitions: args.flap_transitions,
        flap_window_cycles: args.flap_window_cycles,
        min_coverage: args.min_coverage,
        once: args.once,
    })
}

/// `--flap-transitions`: 0 (off) or 3-100 (2 would be any fault that ended).
fn flap_transitions(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n == 0 || (3..=100).contains(&n) => Ok(n),
        Ok(_) => Err("must be 0 (off) or between 3 and 100".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// `--runbook-url`: an absolute http(s) URL without a fragment (the
/// section anchor is appended to it).
fn runbook_url(s: &str) -> Result<String, String> {
    let u = http_url(s)?;
    if u.fragment().is_some() {
        return Err("must not have a #fragment: each alert appends its section's".into());
    }
    Ok(s.to_string())
}

/// `--grafana-url`: empty, or an absolute http(s) URL.
fn grafana_url(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Ok(String::new());
    }
    http_url(s).map(|_| s.to_string())
}

fn http_url(s: &str) -> Result<reqwest::Url, String> {
    let u = reqwest::Url::parse(s).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(format!("scheme {:?}: must be http or https", u.scheme()));
    }
    Ok(u)
}

/// Load `--web.config.file` while parsing, so a bad file is a usage
/// error (exit 2) naming the file and key.
fn open_web_config(path: &str) -> Result<Arc<WebSource>, WebConfigError> {
    WebSource::open(std::path::Path::new(path)).map(Arc::new)
}

/// Validate flags that clap cannot.
fn check_args(args: &RunArgs) -> Result<(), BadInput> {
    if args.window < Duration::from_secs(1) {
        return Err(BadInput(format!(
            "--window {:?}: must be at least 1s",
            args.window
        )));
    }
    if !(0.01..=1.0).contains(&args.min_coverage) {
        return Err(BadInput(format!(
            "--min-coverage {}: must be between 0.01 and 1",
            args.min_coverage
        )));
    }
    if let Some(b) = args.max_cycle_response_size {
        if b < args.max_response_size {
            return Err(BadInput(format!(
                "--max-cycle-response-size {b}: must be at least --max-response-size ({})",
                args.max_response_size
            )));
        }
    }
    if args.protocols.is_empty() {
        return Err(BadInput(
            "--protocol: give at least one of udp, icmp, rdma".to_string(),
        ));
    }
    if let Some(m) = &args.matchers {
        if m.contains('{') || m.contains('}') {
            return Err(BadInput(format!(
                "--matchers {m:?}: give label matchers without braces, e.g. job=\"skeletonhunter\""
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::flags::AUTO_MIN_NODES;
    use crate::input::histograms::RttForm;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(extra: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut argv = vec!["x", "--prometheus", "http://127.0.0.1:9090"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).map(|c| c.run)
    }

    /// The settings of a command line that parses and checks.
    fn settings_of(extra: &[&str]) -> Settings {
        settings(parse(extra).unwrap()).unwrap()
    }

    /// The error text of a command line clap refuses as a usage error
    /// (exit 2) that names `flag`.
    fn refused(args: &[&str], flag: &str) -> String {
        let e = parse(args).err().unwrap();
        assert_eq!(e.exit_code(), 2, "{args:?}");
        let text = e.to_string();
        assert!(text.contains(flag), "{args:?}: {text}");
        text
    }

    #[test]
    fn flap_flags_have_defaults_and_bounds() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.flap_transitions, a.flap_window_cycles), (3, 60));
        assert_eq!(
            parse(&["--flap-transitions=0"]).unwrap().flap_transitions,
            0
        );
        for bad in [
            "--flap-transitions=2",
            "--flap-transitions=101",
            "--flap-window-cycles=0",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn new_and_deprecated_web_and_log_flags() {
        let a = parse(&[
            "--web.listen-address=127.0.0.1:9500",
            "--web.telemetry-path=/m",
            "--log.level=debug",
            "--log.format=json",
        ])
        .unwrap();
        assert_eq!(a.log.directive(), "debug");
        assert!(a.deprecated_flags().is_empty());
        let s = settings(a).unwrap();
        assert_eq!(s.listen.to_string(), "127.0.0.1:9500");
        assert_eq!(s.telemetry_path, "/m");
        let old = parse(&["--listen=127.0.0.1:9501", "--log-level=warn"]).unwrap();
        assert_eq!(old.log.directive(), "warn");
        assert_eq!(old.deprecated_flags().len(), 2);
        assert_eq!(settings(old).unwrap().listen.to_string(), "127.0.0.1:9501");
        assert_eq!(settings_of(&[]).listen.to_string(), "0.0.0.0:9479");
        assert!(parse(&["--listen=127.0.0.1:1", "--web.listen-address=127.0.0.1:2"]).is_err());
        for bad in ["metrics", "/report", "/"] {
            refused(&["--web.telemetry-path", bad], "--web.telemetry-path");
        }
        assert!(parse(&["--log.format=text"]).is_err());
    }

    #[test]
    fn the_answer_budget_defaults_to_four_answers_and_holds_one() {
        let s = settings_of(&[]);
        assert_eq!(
            (s.max_response, s.max_cycle_response),
            (64 << 20, 256 << 20)
        );
        let s = settings_of(&["--max-response-size=1MiB"]);
        assert_eq!(s.max_cycle_response, 4 << 20);
        let a = parse(&["--max-response-size=8MiB", "--max-cycle-response-size=4MiB"]).unwrap();
        let e = check_args(&a).unwrap_err().to_string();
        assert!(
            e.contains("--max-cycle-response-size") && e.contains("--max-response-size"),
            "{e}"
        );
    }

    #[test]
    fn histograms_and_query_timeout() {
        let s = settings_of(&[]);
        assert_eq!(s.histograms, None, "auto by default");
        assert_eq!(s.query_timeout(), Duration::from_secs(10), "2 x --interval");
        let s = settings_of(&["--interval=2s", "--timeout=7s"]);
        assert_eq!(
            s.query_timeout(),
            Duration::from_secs(7),
            "never below --timeout"
        );
        let s = settings_of(&["--histograms=native", "--query.timeout=30s", "--timeout=1s"]);
        assert_eq!(s.histograms, Some(RttForm::Native));
        assert_eq!(s.query_timeout(), Duration::from_secs(30));
        assert_eq!(s.timeout, Duration::from_secs(1));
        let s = settings_of(&["--histograms", "classic"]);
        assert_eq!(s.histograms, Some(RttForm::Classic));
        refused(&["--histograms=both"], "--histograms");
        refused(&["--query.timeout=0s"], "--query.timeout");
    }

    #[test]
    fn pair_shards_fixed_or_auto() {
        let shards = |extra: &[&str]| settings_of(extra).pair_shards;
        // auto by default: a pair read once per scrape (15s over 5s: every
        // third cycle; 30s over 5s: every sixth), on fleets of AUTO_MIN_NODES.
        assert_eq!(shards(&[]), 3, "the default intervals: every third cycle");
        assert_eq!(shards(&["--scrape-interval=30s"]), 6, "auto by default");
        let s = settings_of(&["--scrape-interval=30s"]);
        assert_eq!(s.pair_shards_min_nodes, AUTO_MIN_NODES);
        // Unsharded at run time, a finding confirms as fast as with 1.
        assert_eq!(s.confirm_after(1), s.confirm_cycles);
        assert_eq!(s.confirm_after(3), s.confirm_cycles + 2);
        assert_eq!(s.clear_hold(3) - s.clear_hold(1), 2 * s.interval);
        let fixed = settings_of(&["--pair-shards=3"]);
        assert_eq!(fixed.pair_shards_min_nodes, 0, "a count is used as given");
        assert_eq!(shards(&["--pair-shards=3"]), 3);
        // auto: the scrape interval over the cycle interval, rounded down.
        let auto = ["--pair-shards=auto", "--interval=10s"];
        assert_eq!(shards(&[&auto[..], &["--scrape-interval=30s"]].concat()), 3);
        assert_eq!(shards(&[&auto[..], &["--scrape-interval=15s"]].concat()), 1);
        assert_eq!(shards(&[&auto[..], &["--scrape-interval=5s"]].concat()), 1);
        let sub_second = [
            "--pair-shards=auto",
            "--interval=100ms",
            "--scrape-interval=300ms",
        ];
        assert_eq!(shards(&sub_second), 3);
        assert_eq!(
            shards(&[
                "--pair-shards=AUTO",
                "--interval=1s",
                "--scrape-interval=1h"
            ]),
            64
        );
        for bad in ["0", "65", "-1", "two", ""] {
            let text = refused(&[&format!("--pair-shards={bad}")], "--pair-shards");
            assert!(text.contains("auto"), "{bad}: {text}");
        }
    }

    #[test]
    fn runbook_and_grafana_urls() {
        let s = settings_of(&[]);
        assert_eq!(s.runbook_url, crate::online::alerts::DEFAULT_RUNBOOK_URL);
        assert_eq!(s.grafana_url, "");
        let s = settings_of(&[
            "--runbook-url=https://wiki.example/runbooks",
            "--grafana-url=http://grafana:3000",
        ]);
        assert_eq!(
            s.alert_links().runbook_base,
            "https://wiki.example/runbooks"
        );
        assert_eq!(
            s.alert_links().dashboard_url(),
            "http://grafana:3000/d/skeletonhunter-fabric"
        );
        for (flag, bad) in [
            ("--runbook-url", "docs/runbooks.md"),
            ("--runbook-url", "https://x/runbooks.md#top"),
            ("--runbook-url", "ftp://x/runbooks.md"),
            ("--grafana-url", "grafana:3000"),
        ] {
            refused(&[&format!("{flag}={bad}")], flag);
        }
    }
}
