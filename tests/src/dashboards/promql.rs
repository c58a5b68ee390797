//! PromQL text handling: Grafana's variable substitution and the metric
//! names a query reads.

use super::CheckOptions;
use std::collections::BTreeSet;

/// Escape a value for a PromQL regex matcher inside a double-quoted string,
/// as Grafana does for multi-value variables.
pub(super) fn regex_escape(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push_str("\\\\");
        }
        out.push(c);
    }
    out
}

/// Replace `$name`, `${name}`, `${name:fmt}` and `[[name]]` by the values in
/// `vars` (longest names first, so `$tor` does not eat `$tor_id`), and
/// Grafana's built-ins from `opts`.
pub fn substitute(expr: &str, vars: &[(String, String)], opts: &CheckOptions) -> String {
    let builtins = [
        ("__rate_interval".to_string(), opts.rate_interval.clone()),
        (
            "__interval_ms".to_string(),
            opts.interval.as_millis().to_string(),
        ),
        (
            "__interval".to_string(),
            format!("{}ms", opts.interval.as_millis()),
        ),
        ("__range_s".to_string(), opts.range.as_secs().to_string()),
        ("__range_ms".to_string(), opts.range.as_millis().to_string()),
        ("__range".to_string(), format!("{}s", opts.range.as_secs())),
    ];
    let mut all: Vec<&(String, String)> = vars.iter().chain(builtins.iter()).collect();
    all.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    let mut s = expr.to_string();
    for (name, value) in &all {
        s = s.replace(&format!("[[{name}]]"), value);
        // ${name} and ${name:format}
        while let Some(start) = s.find(&format!("${{{name}")) {
            let after = start + 2 + name.len();
            let rest = &s[after..];
            let end = if rest.starts_with('}') {
                Some(after + 1)
            } else if rest.starts_with(':') {
                rest.find('}').map(|i| after + i + 1)
            } else {
                None
            };
            match end {
                Some(end) => s.replace_range(start..end, value),
                None => break,
            }
        }
        // $name not followed by an identifier character.
        let pat = format!("${name}");
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find(&pat) {
            let next = rest[i + pat.len()..].chars().next();
            out.push_str(&rest[..i]);
            if next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.push_str(&pat);
            } else {
                out.push_str(value);
            }
            rest = &rest[i + pat.len()..];
        }
        out.push_str(rest);
        s = out;
    }
    s
}

const NOT_METRICS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
    "atan2",
    // Aggregations may be followed by `by (...)` rather than `(`.
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Metric names a PromQL expression reads (selectors outside strings,
/// label matchers, ranges, grouping lists and function names).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let b = expr.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    let is_start = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b':';
    let is_cont = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let skip_to = |i: usize, close: u8| -> usize {
        let mut j = i + 1;
        let mut quote: Option<u8> = None;
        while j < b.len() {
            let c = b[j];
            match quote {
                Some(_) if c == b'\\' => j += 1,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == b'"' || c == b'\'' || c == b'`' => quote = Some(c),
                None if c == close => return j + 1,
                None => {}
            }
            j += 1;
        }
        j
    };
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' || c == b'`' {
            // Skip a string literal.
            let mut j = i + 1;
            while j < b.len() && b[j] != c {
                if b[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            i = j + 1;
        } else if c == b'{' {
            i = skip_to(i, b'}');
        } else if c == b'[' {
            i = skip_to(i, b']');
        } else if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_digit() || c == b'.' {
            // Numbers and durations (1m, 0.99, 1e-6).
            while i < b.len() && (is_cont(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else if is_start(c) {
            let start = i;
            while i < b.len() && is_cont(b[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let mut j = i;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            let lower = word.to_ascii_lowercase();
            if GROUPING.contains(&lower.as_str()) {
                if j < b.len() && b[j] == b'(' {
                    i = skip_to(j, b')');
                }
            } else if j < b.len() && b[j] == b'(' {
                // A function or aggregation: not a metric.
            } else if !NOT_METRICS.contains(&lower.as_str()) {
                out.insert(word.to_string());
            }
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_skip_functions_labels_and_grouping() {
        let m = metric_names(
            r#"sum by (tor, le) (rate(skeletonhunter_probe_rtt_seconds_bucket{job="x", a=~"b|c"}[$__rate_interval]))
               / on (tor) group_left (spine) tor:skeletonhunter_probe_sent:rate1m > bool 0.5 or vector(0)"#,
        );
        let want: BTreeSet<String> = [
            "skeletonhunter_probe_rtt_seconds_bucket",
            "tor:skeletonhunter_probe_sent:rate1m",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(m, want);
    }

    #[test]
    fn substitute_handles_all_syntaxes_and_longest_name_first() {
        let vars = vec![
            ("tor".to_string(), "t1".to_string()),
            ("tor_id".to_string(), "X".to_string()),
        ];
        let o = CheckOptions::default();
        assert_eq!(
            substitute(
                r#"x{a="$tor",b="${tor}",c="${tor:regex}",d="[[tor]]",e="$tor_id"}[$__rate_interval]"#,
                &vars,
                &o
            ),
            r#"x{a="t1",b="t1",c="t1",d="t1",e="X"}[1m]"#
        );
    }
}
