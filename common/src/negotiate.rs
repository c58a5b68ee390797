//! Content negotiation of a scrape, pure: which exposition format the
//! `Accept` header prefers (with q-values, as client_golang's
//! `expfmt.NegotiateIncludingOpenMetrics` does) and whether
//! `Accept-Encoding` allows gzip.

/// An exposition format a scraper can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The classic Prometheus text format (`text/plain; version=0.0.4`).
    Classic,
    /// OpenMetrics text 1.0.0.
    OpenMetrics,
    /// Length-delimited `io.prometheus.client.MetricFamily` protobuf: the
    /// one format that carries native histograms to Prometheus 2.x.
    Protobuf,
}

/// One media range of an `Accept`-style header: its value and q-value.
fn ranges(header: &str) -> impl Iterator<Item = (&str, f32, Vec<(&str, &str)>)> {
    // Headers are small; the cap keeps a hostile one from costing more.
    header.split(',').take(64).filter_map(|part| {
        let mut fields = part.split(';').map(str::trim);
        let value = fields.next().filter(|v| !v.is_empty())?;
        let mut q = 1.0;
        let mut params = Vec::new();
        for f in fields.take(16) {
            let (k, v) = f.split_once('=').unwrap_or((f, ""));
            let (k, v) = (k.trim(), v.trim().trim_matches('"'));
            if k.eq_ignore_ascii_case("q") {
                q = v.parse::<f32>().ok().filter(|q| q.is_finite())?;
            } else {
                params.push((k, v));
            }
        }
        Some((value, q.clamp(0.0, 1.0), params))
    })
}

/// The format `accept` prefers: the acceptable (q > 0) range with the
/// highest q-value that names a format we serve (earlier wins a tie);
/// classic text when none does, as Prometheus' own clients answer.
pub fn format(accept: Option<&str>) -> Format {
    let mut best: Option<(f32, Format)> = None;
    for (value, q, params) in ranges(accept.unwrap_or("")) {
        let param = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        };
        let format = if value.eq_ignore_ascii_case("application/vnd.google.protobuf")
            && param("proto") == Some("io.prometheus.client.MetricFamily")
            && param("encoding") == Some("delimited")
        {
            Format::Protobuf
        } else if value.eq_ignore_ascii_case("application/openmetrics-text")
            && matches!(param("version"), None | Some("1.0.0" | "0.0.1"))
        {
            Format::OpenMetrics
        } else if value.eq_ignore_ascii_case("text/plain")
            && matches!(param("version"), None | Some("0.0.4"))
        {
            Format::Classic
        } else {
            continue;
        };
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, format));
        }
    }
    best.map_or(Format::Classic, |(_, f)| f)
}

/// Whether `accept_encoding` allows a gzip-coded answer: `gzip` (or
/// `x-gzip`, or `*`) with a q-value above 0, and not refused by name.
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    let mut named = None;
    let mut any = None;
    for (value, q, _) in ranges(accept_encoding.unwrap_or("")) {
        if value.eq_ignore_ascii_case("gzip") || value.eq_ignore_ascii_case("x-gzip") {
            named = Some(q > 0.0);
        } else if value == "*" {
            any = Some(q > 0.0);
        }
    }
    named.or(any).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_q_values_choose_the_format() {
        use Format::{Classic, OpenMetrics, Protobuf};
        assert_eq!(format(None), Classic);
        for (accept, want) in [
            ("*/*", Classic),
            ("application/openmetrics-text;version=1.0.0", OpenMetrics),
            // The brief's case: OpenMetrics offered at 0.5, text at 0.9.
            (
                "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;q=0.9",
                Classic,
            ),
            // Prometheus' own scrape header prefers OpenMetrics.
            (
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                OpenMetrics,
            ),
            ("text/plain;q=0.2, application/openmetrics-text; q=0.3", OpenMetrics),
            // q=0 means "not acceptable"; unknown versions are not ours.
            ("application/openmetrics-text;q=0", Classic),
            ("application/openmetrics-text;version=2.0.0", Classic),
            // A malformed q-value drops that range only.
            ("application/openmetrics-text;q=abc, text/plain", Classic),
            // Prometheus with --enable-feature=native-histograms asks for
            // protobuf first; other encodings of it are not ours.
            (
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                Protobuf,
            ),
            (
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text",
                Classic,
            ),
            // A tie keeps the first.
            ("application/openmetrics-text, text/plain", OpenMetrics),
        ] {
            assert_eq!(format(Some(accept)), want, "{accept}");
        }
    }

    #[test]
    fn gzip_only_when_acceptable() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, gzip;q=0.5")));
        assert!(accepts_gzip(Some("*")));
        assert!(!accepts_gzip(None));
        assert!(!accepts_gzip(Some("identity")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("*, gzip;q=0")));
    }
}
