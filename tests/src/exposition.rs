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

/// (sum, count) of histogram `name` per value of its one label `label`
/// (e.g. a duration histogram by `query`), from the `_sum` and `_count`
/// lines; series with other labels are passed over.
pub fn sum_count_by(
    text: &str,
    name: &str,
    label: &str,
) -> std::collections::BTreeMap<String, (f64, f64)> {
    let mut out = std::collections::BTreeMap::<String, (f64, f64)>::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let open = format!("{{{label}=\"");
        let (is_sum, rest) = match rest.split_once(open.as_str()) {
            Some(("_sum", r)) => (true, r),
            Some(("_count", r)) => (false, r),
            _ => continue,
        };
        let Some((value_of_label, value)) = rest.split_once("\"} ") else {
            continue;
        };
        if value_of_label.contains('"') {
            continue; // another label follows
        }
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        let e = out.entry(value_of_label.to_string()).or_default();
        if is_sum {
            e.0 = v;
        } else {
            e.1 = v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_counts_by_one_label() {
        let text = "h_sum{q=\"a\"} 1.5\nh_count{q=\"a\"} 3\nh_bucket{q=\"a\",le=\"1\"} 2\nh_sum{q=\"b\"} 2\nh_count{q=\"b\"} 1\nhx_sum{q=\"c\"} 9\nh_sum{q=\"d\",x=\"y\"} 4\n";
        let m = sum_count_by(text, "h", "q");
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m["a"], (1.5, 3.0));
        assert_eq!(m["b"], (2.0, 1.0));
    }
}
