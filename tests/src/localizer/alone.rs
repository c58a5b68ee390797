//! Each of the localizer's cycle queries sent alone, one after another, to
//! a store nobody else queries: what one costs the store with no other
//! query beside it. A cycle sends them all at once, so where the store has
//! fewer free cores than queries they queue; set beside the cycle's own
//! times (`skeletonhunter_localizer_query_duration_seconds`), these tell a
//! cycle bound by the store's work from one bound by its cores.
//!
//! The texts are the localizer's own (`input::promql::Queries`), not copies.

use skeletonhunter_localizer::input::histograms::RttForm;
use skeletonhunter_localizer::input::promql::Queries;
use skeletonhunter_tools::http::urlencode;
use skeletonhunter_tools::servers::Server;
use std::time::{Duration, Instant};

/// One query timed alone.
#[derive(Debug, Clone)]
pub struct Alone {
    /// The query's `query` label in the localizer's metrics.
    pub name: &'static str,
    /// From sending the request to the last byte of the answer.
    pub seconds: f64,
    /// Series in the answer.
    pub series: usize,
    /// Bytes of the answer.
    pub bytes: usize,
}

/// The cycle's per-pair queries and the node identities over `window`, in
/// `form`, each sent alone to `store` and timed; a query the store refuses
/// or fails is an error naming it.
pub fn time_queries_alone(
    store: &Server,
    window: Duration,
    form: RttForm,
) -> anyhow::Result<Vec<Alone>> {
    let q = Queries::new(window, Duration::from_secs(3600), None, form);
    let mut list = vec![
        ("sent", q.sent),
        ("lost", q.lost),
        ("dial_failures", q.dial_failures),
        ("consecutive_lost", q.consecutive_lost),
        ("rtt_p50", q.rtt_p50),
        ("topology_now", q.topology_now),
    ];
    if let Some(count) = q.rtt_count {
        list.push(("rtt_count", count));
    }
    let mut out = Vec::new();
    for (name, promql) in list {
        let path = format!("/api/v1/query?query={}", urlencode(&promql));
        let started = Instant::now();
        let (status, body) = store.get(&path)?;
        let seconds = started.elapsed().as_secs_f64();
        if status != 200 {
            let head: String = body.chars().take(300).collect();
            anyhow::bail!("{name} ({promql}): HTTP {status}: {head}");
        }
        out.push(Alone {
            name,
            seconds,
            series: body.matches("\"metric\":").count(),
            bytes: body.len(),
        });
    }
    Ok(out)
}
