//! The series budget: how many series one peer costs per protocol, as a
//! scraper stores them. Counted on real renders of [`Metrics`], so the
//! table in docs/exporter.md ("Series budget") is checked by a test and
//! printed by the scale benchmark.

use super::metrics::Metrics;
use crate::model::{HistogramMode, Protocol};
use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
    Histogram, MetricFamily,
};
use skeletonhunter_common::Identity;
use std::net::IpAddr;

/// Series in a classic text exposition: its sample lines.
pub fn text_series(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count()
}

/// Whether Prometheus reads `h` as a native histogram (its own test in
/// the protobuf parser: spans, a zero bucket or a zero threshold).
pub fn is_native(h: &Histogram) -> bool {
    !h.positive_span.is_empty()
        || !h.negative_span.is_empty()
        || h.zero_threshold > 0.0
        || h.zero_count > 0
}

/// Series a native-histogram Prometheus stores from a protobuf scrape: one
/// per counter or gauge, one per native histogram (its classic buckets
/// are then ignored), and buckets with `+Inf`, `_sum` and `_count` per
/// classic histogram.
pub fn protobuf_series(families: &[MetricFamily]) -> usize {
    families
        .iter()
        .flat_map(|f| &f.metric)
        .map(|m| match (&m.histogram, &m.summary) {
            (Some(h), _) if is_native(h) => 1,
            (Some(h), _) => {
                let has_inf = h.bucket.last().is_some_and(|b| b.upper_bound.is_infinite());
                h.bucket.len() + usize::from(!has_inf) + 2
            }
            (None, Some(s)) => s.quantile.len() + 2,
            (None, None) => 1,
        })
        .sum()
}

/// Series one peer costs for one protocol, in text and as a
/// native-histogram Prometheus stores the protobuf scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerSeries {
    /// In the classic text (and OpenMetrics) exposition.
    pub text: usize,
    /// Stored from the protobuf exposition.
    pub protobuf: usize,
}

/// Render `m` in text and protobuf and count (text, protobuf) series.
pub fn count(m: &Metrics) -> Result<PeerSeries, String> {
    let text = String::from_utf8(m.render(None).body.to_vec()).map_err(|e| e.to_string())?;
    let families = decode(&m.render(Some(PROTOBUF_ACCEPT)).body)?;
    Ok(PeerSeries {
        text: text_series(&text),
        protobuf: protobuf_series(&families),
    })
}

/// Decode a delimited protobuf exposition.
pub fn decode(mut buf: &[u8]) -> Result<Vec<MetricFamily>, String> {
    let mut families = Vec::new();
    while !buf.is_empty() {
        let f = <MetricFamily as prost::Message>::decode_length_delimited(&mut buf)
            .map_err(|e| format!("protobuf exposition does not decode: {e}"))?;
        families.push(f);
    }
    Ok(families)
}

/// The `Accept` header of a native-histogram Prometheus.
pub const PROTOBUF_ACCEPT: &str =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";

/// Series one peer adds for `protocol` in `mode`: every series the
/// prober of that protocol creates for a peer (TCP: its dial series; UDP:
/// its flow series; RDMA: its delay histograms), counted as the
/// difference between renders with and without the peer.
pub fn per_peer(mode: HistogramMode, protocol: Protocol) -> Result<PeerSeries, String> {
    let m = Metrics::with_histograms(&Identity::default(), mode);
    let before = count(&m)?;
    let peer: IpAddr = [198, 18, 0, 2].into();
    let s = m.series(peer, "peer", protocol);
    s.sent.inc();
    s.rtt.observe(50e-6);
    match protocol {
        Protocol::Udp => drop(m.flow_series(peer, "peer")),
        Protocol::Tcp => drop(m.dial_series(peer, "peer")),
        Protocol::Rdma => {
            let r = m.rdma_series(peer, "peer");
            r.prober_delay.observe(2e-6);
            r.responder_delay.observe(2e-6);
        }
        Protocol::Icmp => {}
    }
    let after = count(&m)?;
    Ok(PeerSeries {
        text: after.text - before.text,
        protobuf: after.protobuf - before.protobuf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_budget_holds() {
        for p in Protocol::ALL {
            let classic = per_peer(HistogramMode::Classic, p).unwrap();
            let native = per_peer(HistogramMode::Native, p).unwrap();
            let both = per_peer(HistogramMode::Both, p).unwrap();
            // Classic: the same series whatever the format.
            assert_eq!(classic.text, classic.protobuf, "{p}");
            assert!(classic.text > 25, "{p}: {classic:?}");
            // The goal: at most 12 series per peer and protocol
            // with native histograms.
            assert!(native.protobuf <= 12, "{p}: {native:?}");
            assert!(both.protobuf <= 12, "{p}: {both:?}");
            // Native text keeps _count/_sum/+Inf; both keeps the classic text.
            assert!(native.text <= 12, "{p}: {native:?}");
            assert_eq!(both.text, classic.text, "{p}");
        }
        // The table in docs/exporter.md.
        let udp = per_peer(HistogramMode::Classic, Protocol::Udp).unwrap();
        assert_eq!(udp.text, 32);
        let rdma = per_peer(HistogramMode::Native, Protocol::Rdma).unwrap();
        assert_eq!(rdma.protobuf, 6);
    }

    /// Every histogram the exporter has (RTT of each protocol, RDMA
    /// delays, host-stack delays), filled alike, in histogram `mode`.
    fn filled(mode: HistogramMode) -> Metrics {
        let m = Metrics::with_histograms(&Identity::default(), mode);
        let peer: IpAddr = "10.0.0.2".parse().unwrap();
        for (i, p) in Protocol::ALL.into_iter().enumerate() {
            let s = m.series(peer, "b", p);
            s.sent.inc_by(3);
            s.lost_one();
            for rtt in [0.0, 3e-6, 50e-6, 0.002, 9.0] {
                s.answered(rtt * (i + 1) as f64);
            }
        }
        m.dial_series(peer, "b").success.set(1);
        m.flow_series(peer, "b").flows.set(21);
        let r = m.rdma_series(peer, "b");
        r.prober_delay.observe(2e-6);
        r.responder_delay.observe(0.0);
        m.host_stack(Protocol::Udp, crate::model::StackStage::Responder)
            .observe(0.3);
        m
    }

    /// `text` without the lines read from the clock or the host at each
    /// render (they differ between any two renders, whatever the mode),
    /// and with the series of each family in a fixed order: a family keeps
    /// its series in a hash map, so two registries list them in different
    /// orders. A series is a run of lines with the same labels but `le`
    /// (a histogram's `_sum`, `_count` and buckets), kept whole.
    fn canonical(text: &str) -> String {
        let volatile = |l: &str| {
            [
                "skeletonhunter_exporter_render_seconds ",
                "process_",
                "skeletonhunter_host_udp_receive_buffer_errors_total ",
                "skeletonhunter_host_cpu_throttled_seconds_total ",
            ]
            .iter()
            .any(|p| l.starts_with(p))
        };
        let key = |l: &str| {
            let labels = l.split_once('{').map_or("", |(_, r)| r);
            let labels = labels.split_once('}').map_or("", |(l, _)| l);
            labels
                .split(',')
                .filter(|kv| !kv.starts_with("le="))
                .collect::<Vec<_>>()
                .join(",")
        };
        let (mut out, mut series) = (String::new(), Vec::<(String, String)>::new());
        let flush = |out: &mut String, series: &mut Vec<(String, String)>| {
            series.sort();
            out.extend(series.drain(..).map(|(_, lines)| lines));
        };
        for l in text.split_inclusive('\n').filter(|l| !volatile(l)) {
            if l.starts_with('#') {
                flush(&mut out, &mut series);
                out.push_str(l);
            } else {
                match series.last_mut() {
                    Some((k, lines)) if *k == key(l) => lines.push_str(l),
                    _ => series.push((key(l), l.to_string())),
                }
            }
        }
        flush(&mut out, &mut series);
        out
    }

    #[test]
    fn both_serves_text_scrapers_what_classic_serves_byte_for_byte() {
        // What curl, promtool, Prometheus without native histograms and
        // VictoriaMetrics/vmagent ask for: never protobuf.
        let text_accepts = [
            None,
            Some("*/*"),
            Some("text/plain;version=0.0.4"),
            Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
            Some("text/plain;version=0.0.4;q=1,*/*;q=0.1"),
        ];
        let (classic, both) = (filled(HistogramMode::Classic), filled(HistogramMode::Both));
        for accept in text_accepts {
            let (c, b) = (classic.render(accept), both.render(accept));
            assert_eq!(c.content_type, b.content_type, "{accept:?}");
            assert_ne!(
                c.content_type,
                skeletonhunter_common::exposition::PROTOBUF_CONTENT_TYPE
            );
            let text = |body: &[u8]| canonical(std::str::from_utf8(body).unwrap());
            let (c, b) = (text(&c.body), text(&b.body));
            assert!(
                c.contains("skeletonhunter_probe_rtt_seconds_bucket{"),
                "{c}"
            );
            assert!(c.contains("skeletonhunter_rdma_prober_delay_seconds_bucket{"));
            let differ = c.lines().zip(b.lines()).find(|(c, b)| c != b);
            assert!(
                c == b,
                "{accept:?}: both differs from classic in text: {differ:?} ({} vs {} bytes)",
                c.len(),
                b.len()
            );
        }
        // The protobuf scrape is where they differ: native buckets.
        let proto = |m: &Metrics| m.render(Some(PROTOBUF_ACCEPT)).body;
        assert_ne!(proto(&classic), proto(&both));
    }
}
