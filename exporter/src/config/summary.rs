//! `--check-config`: the effective configuration as an operator reads it
//! (one `key: value` line per setting, grouped like the YAML file), not a
//! Rust debug dump.

use super::settings::Config;
use super::traffic::Mode;
use skeletonhunter_common::Kind;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

fn addr(a: Option<SocketAddr>) -> String {
    a.map_or_else(|| "off".to_string(), |a| a.to_string())
}

fn dur(d: Duration) -> String {
    skeletonhunter_common::duration::to_promql(d)
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

impl Config {
    /// The readable summary `--check-config` prints; `nofile`: the
    /// open-file limit the run would have, which caps the connections.
    pub fn summary(&self, nofile: Option<u64>) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "configuration OK\n\nweb:");
        let _ = writeln!(o, "  listen-address: {}", self.listen);
        let _ = writeln!(o, "  telemetry-path: {}", self.telemetry_path);
        let web = self.web.as_ref().map_or("none".to_string(), |w| {
            let tls = if w.serves_tls() { "TLS" } else { "plain HTTP" };
            format!("{} ({tls})", w.path().display())
        });
        let _ = writeln!(o, "  config-file: {web}");
        let h = &self.http;
        // The limit in force, as the run computes it (app::http_limits).
        let cap = nofile.map(|n| (n, super::http_connection_cap(n)));
        let connections = match cap {
            Some((n, cap)) if cap < h.max_connections => format!(
                "{cap} connections (--http-max-connections {} lowered to a quarter of \
                 the open-file limit {n})",
                h.max_connections
            ),
            _ => format!("{} connections", h.max_connections),
        };
        let _ = writeln!(
            o,
            "  limits: {connections}, {} in flight, header timeout {}",
            h.max_in_flight,
            dur(h.header_timeout)
        );
        self.identity_summary(&mut o);
        self.probe_summary(&mut o);
        let _ = writeln!(o, "metrics:\n  histograms: {}", self.histograms.as_str());
        self.discovery_summary(&mut o);
        o
    }

    /// Each field with where it came from, then the map lookup.
    fn identity_summary(&self, o: &mut String) {
        let _ = writeln!(o, "identity:");
        for kind in Kind::ALL {
            let source = self.identity_origin.source(kind).as_str();
            let v = or_dash(self.identity.get(kind));
            let _ = writeln!(o, "  {kind}: {v} ({source})");
        }
        if let Some(t) = &self.identity_origin.topology {
            let entry = if t.found { "found" } else { "MISSING" };
            let _ = writeln!(
                o,
                "  topology_file: {} (entry for host {:?}: {entry})",
                t.file.display(),
                t.host
            );
        }
        if let Some(w) = self.identity_origin.warning() {
            let _ = writeln!(o, "  warning: {w}");
        }
    }

    fn probe_summary(&self, o: &mut String) {
        let protocols: Vec<&str> = self.protocols.iter().map(|p| p.as_str()).collect();
        let _ = writeln!(o, "probe:");
        let _ = writeln!(o, "  protocols: {}", protocols.join(", "));
        let _ = writeln!(
            o,
            "  interval: {}, timeout: {}",
            dur(self.interval),
            dur(self.timeout)
        );
        let _ = writeln!(
            o,
            "  peer ports: udp {}, tcp {}; udp size {} bytes",
            self.udp_port, self.tcp_port, self.udp_size
        );
        let f = &self.flows;
        let _ = writeln!(
            o,
            "  flows per peer: {} (ecmp width {}, window {}, {} traces/min)",
            f.flows,
            f.ecmp_width,
            dur(f.window),
            f.traces_per_minute
        );
        let r = &self.responder;
        let allow = if r.open() {
            "everyone".to_string()
        } else {
            let mut a: Vec<String> = r.allow.iter().map(ToString::to_string).collect();
            if r.allow_peers {
                a.push("current peers".into());
            }
            a.join(", ")
        };
        let _ = writeln!(o, "responder:");
        let _ = writeln!(
            o,
            "  udp: {}, tcp: {}",
            addr(self.udp_listen),
            addr(self.tcp_listen)
        );
        let _ = writeln!(
            o,
            "  answers: {allow}; rate limit {}/s per source",
            r.rate_limit
        );
    }

    fn discovery_summary(&self, o: &mut String) {
        let _ = writeln!(o, "discovery:");
        let _ = writeln!(o, "  static peers: {}", self.static_peers.len());
        for p in self.static_peers.iter().take(20) {
            let name = p.name.as_deref().unwrap_or("(learned)");
            let _ = writeln!(o, "    {} {name}", p.addr);
        }
        if self.static_peers.len() > 20 {
            let _ = writeln!(o, "    ... {} more", self.static_peers.len() - 20);
        }
        for d in &self.dns {
            let kind = if d.srv { "SRV" } else { "A/AAAA" };
            let _ = writeln!(o, "  dns: {} ({kind}, every {})", d.name, dur(d.refresh));
        }
        if let Some(m) = &self.tor_mesh {
            let file = m
                .file
                .as_ref()
                .map_or("-".into(), |f| f.display().to_string());
            let _ = writeln!(
                o,
                "  tor mesh: file {file}, {} inline peers, every {}",
                m.peers.len(),
                dur(m.refresh)
            );
        }
        let mode = match self.ebpf.mode {
            Mode::Auto => "auto (eBPF, else /proc polling)",
            Mode::Ebpf => "ebpf",
            Mode::Poll => "poll",
            Mode::Off => "off",
        };
        let _ = writeln!(o, "  traffic: {mode}; {} cgroups", self.ebpf.cgroups.len());
    }
}
