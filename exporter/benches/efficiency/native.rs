//! The median of native histograms merged across series: what the bench
//! compares against the reference pinger's median.

use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
    Histogram, MetricFamily,
};
use std::collections::BTreeMap;

/// Add the positive buckets of `h` (index → count) to `into`.
fn add_buckets(h: &Histogram, into: &mut BTreeMap<i32, u64>) {
    let mut deltas = h.positive_delta.iter();
    let (mut index, mut count) = (0i32, 0i64);
    for (i, span) in h.positive_span.iter().enumerate() {
        // The first span's offset is absolute, the others skip a gap.
        index = if i == 0 {
            span.offset
        } else {
            index + span.offset
        };
        for _ in 0..span.length {
            count += deltas.next().copied().unwrap_or(0);
            *into.entry(index).or_default() += count.max(0) as u64;
            index += 1;
        }
    }
}

/// The median, in seconds, of every native histogram of `family` whose
/// labels include `label` = `value`: the geometric middle of the bucket
/// holding it (bucket `i` spans (b^(i-1), b^i], b = 2^(2^-schema)).
pub fn median(families: &[MetricFamily], family: &str, label: (&str, &str)) -> Option<f64> {
    let f = families.iter().find(|f| f.name == family)?;
    let mut buckets = BTreeMap::new();
    let (mut zero, mut schema) = (0u64, None);
    for m in &f.metric {
        if !m
            .label
            .iter()
            .any(|l| l.name == label.0 && l.value == label.1)
        {
            continue;
        }
        let Some(h) = &m.histogram else { continue };
        schema = Some(h.schema);
        zero += h.zero_count;
        add_buckets(h, &mut buckets);
    }
    let total = zero + buckets.values().sum::<u64>();
    if total == 0 {
        return None;
    }
    let base = 2f64.powf(2f64.powi(-schema?));
    let mut seen = zero;
    if seen * 2 >= total {
        return Some(0.0);
    }
    buckets.into_iter().find_map(|(i, c)| {
        seen += c;
        (seen * 2 >= total).then(|| base.powf(i as f64 - 0.5))
    })
}
