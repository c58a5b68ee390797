//! Alertmanager's alerts as the tests and the demo read them.

/// The parts of an Alertmanager alert the tests and the demo look at.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertView {
    /// The rule or localizer alert name.
    pub alertname: String,
    /// The blamed component's kind (`tor`, `node`, ...) or `pair`/`exporter`/`localizer`.
    pub kind: String,
    /// The blamed component's id.
    pub component: String,
    /// `loss`, `latency` or `unreachable`.
    pub symptom: String,
    /// `active`, `suppressed` (inhibited/silenced) or `unprocessed`.
    pub state: String,
    /// The whole alert, for printing and for fields not lifted out.
    pub json: serde_json::Value,
}

impl AlertView {
    /// Whether the alert blames a fabric component (not a probe pair, an
    /// exporter or the localizer).
    pub fn is_component(&self) -> bool {
        self.kind
            .parse::<skeletonhunter_common::Kind>()
            .is_ok_and(|k| k != skeletonhunter_common::Kind::Tenant)
    }

    /// Whether the alert is about the monitoring itself (an exporter or the
    /// localizer down or stale).
    pub fn is_monitoring(&self) -> bool {
        self.kind == "exporter" || self.kind == "localizer"
    }

    /// `None` for alerts without `kind`/`component` labels (pair or
    /// exporter alerts) and for resolved ones.
    pub fn from_json(a: &serde_json::Value) -> Option<AlertView> {
        let l = &a["labels"];
        let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
        let (kind, component) = (s(&l["kind"]), s(&l["component"]));
        if kind.is_empty() || component.is_empty() {
            return None;
        }
        if let Some(ends) = a["endsAt"].as_str() {
            if is_past_rfc3339(ends) {
                return None;
            }
        }
        Some(AlertView {
            alertname: s(&l["alertname"]),
            kind,
            component,
            symptom: s(&l["symptom"]),
            state: s(&a["status"]["state"]),
            json: a.clone(),
        })
    }
}

/// Whether an RFC 3339 UTC timestamp (as Alertmanager writes them) is in the
/// past. Unparsable timestamps count as not past.
fn is_past_rfc3339(ts: &str) -> bool {
    // "2026-11-21T19:30:31.123Z": compare as seconds since the epoch.
    let parse = || -> Option<i64> {
        let (date, time) = ts.split_once('T')?;
        let mut d = date.split('-').map(str::parse::<i64>);
        let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
        let time = time.trim_end_matches('Z');
        let time = time.split(['+']).next()?;
        let mut t = time.split(':');
        let (hh, mm) = (
            t.next()?.parse::<i64>().ok()?,
            t.next()?.parse::<i64>().ok()?,
        );
        let ss: f64 = t.next()?.parse().ok()?;
        // Days from civil (Howard Hinnant's algorithm).
        let y2 = if m <= 2 { y - 1 } else { y };
        let era = y2.div_euclid(400);
        let yoe = y2 - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146097 + doe - 719468;
        Some(days * 86400 + hh * 3600 + mm * 60 + ss as i64)
    };
    let Some(t) = parse() else { return false };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    t < now
}
