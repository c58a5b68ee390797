//! Reading samples out of a Prometheus text exposition, as the tests see
//! it over HTTP: no parser, just the line conventions every exporter keeps.

/// Value of the first sample whose line starts with `series` (a metric name,
/// optionally with its `{labels}`), followed by a space or a label set.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Sum of the samples of `name` whose label set contains every `labels`
/// fragment (e.g. `dst_node="b"`). `None` when no sample matches.
pub fn sample(body: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in body.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let (series, value) = rest.rsplit_once(' ')?;
        if labels.iter().all(|l| series.contains(l)) {
            *found.get_or_insert(0.0) += value.parse::<f64>().ok()?;
        }
    }
    found
}
