//! Exposition formats: prometheus-client writes OpenMetrics; Debian's
//! promtool (2.42) and older scrapers want the classic text format. Both
//! binaries serve classic by default, OpenMetrics when the `Accept`
//! header asks for it, as Prometheus does, and the delimited protobuf
//! format (the only one that carries native histograms) when a
//! native-histogram Prometheus asks for that. This is the one place that
//! converts between them.

use crate::http::{Reply, OPENMETRICS_CONTENT_TYPE};
use crate::negotiate::{self, Format};
use hyper::StatusCode;
use prometheus_client::encoding::prometheus_protobuf;
use prometheus_client::registry::Registry;
use std::fmt::Write as _;

/// Encode `registry` in the format the `Accept` header prefers (q-values
/// honoured; classic text unless OpenMetrics wins). `size_hint` pre-sizes
/// the buffer so large expositions rarely reallocate.
pub fn render(registry: &Registry, accept: Option<&str>, size_hint: usize) -> Reply {
    let format = negotiate::format(accept);
    if format == Format::Protobuf {
        return match prometheus_protobuf::encode_to_vec(registry) {
            Ok(body) => Reply::new(StatusCode::OK, PROTOBUF_CONTENT_TYPE, body),
            Err(e) => Reply::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("encoding metrics failed: {e}\n"),
            ),
        };
    }
    let (result, body, content_type) = if format == Format::OpenMetrics {
        let mut out = String::with_capacity(size_hint);
        let r = prometheus_client::encoding::text::encode(&mut out, registry);
        (r, out, OPENMETRICS_CONTENT_TYPE)
    } else {
        // Converted line by line while encoding: only one copy of a large
        // exposition is ever in memory.
        let mut w = ClassicWriter::new(size_hint);
        let r = prometheus_client::encoding::text::encode(&mut w, registry);
        (r, w.finish(), CLASSIC_CONTENT_TYPE)
    };
    match result {
        Ok(()) => Reply::new(StatusCode::OK, content_type, body),
        Err(e) => Reply::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}\n"),
        ),
    }
}

/// Content type of the delimited protobuf exposition.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Content type of the classic Prometheus text format.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Converts prometheus-client's OpenMetrics text to the classic text
/// format as it is written: counter families are named with their
/// `_total` suffix in HELP and TYPE, `# UNIT` and `# EOF` lines go.
/// Samples are identical in both formats for the metric types we use
/// (counter, gauge, histogram).
pub struct ClassicWriter {
    out: String,
    line: String,
    pending_help: Option<String>,
}

impl ClassicWriter {
    /// A writer whose output buffer starts with `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        ClassicWriter {
            out: String::with_capacity(capacity),
            line: String::with_capacity(256),
            pending_help: None,
        }
    }

    fn flush_help(&mut self) {
        if let Some(h) = self.pending_help.take() {
            self.out.push_str("# HELP ");
            self.out.push_str(&h);
            self.out.push('\n');
        }
    }

    fn line_done(&mut self) {
        let line = std::mem::take(&mut self.line);
        if line == "# EOF" || line.starts_with("# UNIT ") {
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            self.flush_help();
            self.pending_help = Some(rest.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, typ) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, typ) = match typ {
                "counter" if !name.ends_with("_total") => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "unknown" => (name.to_string(), "untyped"),
                t => (name.to_string(), t),
            };
            if let Some(h) = self.pending_help.take() {
                let help = h.split_once(' ').map(|(_, t)| t).unwrap_or("");
                let _ = writeln!(self.out, "# HELP {name} {help}");
            }
            let _ = writeln!(self.out, "# TYPE {name} {typ}");
        } else {
            self.flush_help();
            self.out.push_str(&line);
            self.out.push('\n');
        }
        self.line = line;
        self.line.clear();
    }

    /// Convert any unterminated last line and return the classic text.
    pub fn finish(mut self) -> String {
        if !self.line.is_empty() {
            self.line_done();
        }
        self.flush_help();
        self.out
    }
}

impl std::fmt::Write for ClassicWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let mut rest = s;
        while let Some(i) = rest.find('\n') {
            self.line.push_str(&rest[..i]);
            self.line_done();
            rest = &rest[i + 1..];
        }
        self.line.push_str(rest);
        Ok(())
    }
}

/// Convert a whole OpenMetrics text to the classic format.
pub fn openmetrics_to_classic(om: &str) -> String {
    let mut w = ClassicWriter::new(om.len());
    let _ = w.write_str(om);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::histogram::Histogram;

    fn registry() -> Registry {
        let mut r = Registry::default();
        let c = Counter::<u64>::default();
        c.inc();
        r.register("demo_events", "Events seen", c);
        let h = Histogram::new([0.001, 0.01]);
        h.observe(0.005);
        r.register("demo_rtt_seconds", "Round trips", h);
        r
    }

    #[test]
    fn classic_is_default_and_names_counters_with_total() {
        let reply = render(&registry(), None, 0);
        assert_eq!(reply.content_type, CLASSIC_CONTENT_TYPE);
        let text = String::from_utf8(reply.body.to_vec()).unwrap();
        assert!(text
            .contains("# HELP demo_events_total Events seen.\n# TYPE demo_events_total counter\n"));
        assert!(text.contains("demo_events_total 1\n"));
        assert!(text.contains("demo_rtt_seconds_bucket{le=\"0.01\"} 1\n"));
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn openmetrics_on_request_and_conversion_matches_streaming() {
        let om = render(
            &registry(),
            Some("application/openmetrics-text;version=1.0.0"),
            0,
        );
        assert_eq!(om.content_type, OPENMETRICS_CONTENT_TYPE);
        let om = String::from_utf8(om.body.to_vec()).unwrap();
        assert!(om.ends_with("# EOF\n"));
        let classic = String::from_utf8(render(&registry(), None, 0).body.to_vec()).unwrap();
        assert_eq!(openmetrics_to_classic(&om), classic);
    }

    #[test]
    fn protobuf_when_a_native_histogram_server_asks() {
        use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::MetricFamily;
        let accept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3";
        let reply = render(&registry(), Some(accept), 0);
        assert_eq!(reply.content_type, PROTOBUF_CONTENT_TYPE);
        let mut buf: &[u8] = &reply.body;
        let mut names = Vec::new();
        while !buf.is_empty() {
            let f = <MetricFamily as prost::Message>::decode_length_delimited(&mut buf).unwrap();
            names.push((f.name.clone(), f.metric.len()));
        }
        assert_eq!(
            names,
            [
                ("demo_events_total".to_string(), 1),
                ("demo_rtt_seconds".to_string(), 1)
            ]
        );
    }
}
