//! Posting a cycle's alerts to every Alertmanager, concurrently, through
//! each one's outbox, and the delivery metrics.

use super::metrics::{AlertmanagerLabels, Metrics};
use super::settings::ServiceError;
use crate::clients::alertmanager::{Outbox, PostError, PostableAlert};
use crate::clients::{Endpoint, EndpointConfig};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the epoch, as the timestamp gauges take them.
pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

struct Target {
    client: Endpoint,
    outbox: Outbox,
    labels: AlertmanagerLabels,
    /// Whether the last post failed (logged once per outage).
    failing: bool,
}

/// Every Alertmanager the loop posts to.
pub(super) struct Delivery {
    targets: Vec<Target>,
    metrics: Arc<Metrics>,
}

impl Delivery {
    /// One client and outbox per URL.
    pub(super) fn new(
        urls: &[String],
        http: &EndpointConfig,
        timeout: Duration,
        queue_capacity: usize,
        metrics: Arc<Metrics>,
    ) -> Result<Delivery, ServiceError> {
        let mut targets = Vec::new();
        for url in urls {
            let client = Endpoint::new(url, timeout, http).map_err(ServiceError::Alertmanager)?;
            targets.push(Target {
                labels: AlertmanagerLabels {
                    alertmanager: client.shown_url().to_string(),
                },
                client,
                outbox: Outbox::new(queue_capacity),
                failing: false,
            });
        }
        Ok(Delivery { targets, metrics })
    }

    /// Number of Alertmanagers.
    pub(super) fn len(&self) -> usize {
        self.targets.len()
    }

    /// Post `alerts` to every Alertmanager through its outbox, concurrently.
    pub(super) async fn deliver(&mut self, alerts: &[PostableAlert]) {
        let mut set = tokio::task::JoinSet::new();
        for (i, t) in self.targets.iter_mut().enumerate() {
            let batch = t.outbox.batch(alerts);
            if batch.is_empty() {
                continue;
            }
            let client = t.client.clone();
            set.spawn(async move {
                let r = client.post_alerts(&batch).await;
                (i, batch.len(), r)
            });
        }
        while let Some(joined) = set.join_next().await {
            let Ok((i, n, result)) = joined else { continue };
            self.record(i, n, result);
        }
        for t in &self.targets {
            self.metrics
                .alert_queue
                .get_or_create(&t.labels)
                .set(t.outbox.pending_len() as i64);
            self.metrics
                .alerts_dropped
                .get_or_create(&t.labels)
                .inner()
                .store(t.outbox.dropped, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The outcome of posting `n` alerts to target `i`.
    fn record(&mut self, i: usize, n: usize, result: Result<(), PostError>) {
        let t = &mut self.targets[i];
        match result {
            Ok(()) => {
                t.outbox.delivered();
                self.metrics
                    .alerts_posted
                    .get_or_create(&t.labels)
                    .inc_by(n as u64);
                self.metrics
                    .last_alert_post_success
                    .get_or_create(&t.labels)
                    .set(unix_now());
                if t.failing {
                    tracing::info!("Alertmanager {} accepts alerts again", t.client.shown_url());
                    t.failing = false;
                }
            }
            Err(e) => {
                self.metrics
                    .alert_post_errors
                    .get_or_create(&t.labels)
                    .inc();
                tracing::warn!(
                    "posting {n} alert(s) failed: {e}; {} resolution(s) queued, retrying next cycle",
                    t.outbox.pending_len()
                );
                t.failing = true;
            }
        }
    }
}
