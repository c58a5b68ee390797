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
}
