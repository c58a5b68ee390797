//! Posting a cycle's alerts to every Alertmanager, concurrently, through
//! each one's outbox, and what each post did (for the cycle's record).

use super::metrics::AlertmanagerLabels;
use super::record::{Post, Sent};
use super::settings::ServiceError;
use crate::clients::alertmanager::{Outbox, PostError, PostableAlert};
use crate::clients::{Endpoint, EndpointConfig};
use std::time::{Duration, SystemTime};

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
}

impl Delivery {
    /// One client and outbox per URL.
    pub(super) fn new(
        urls: &[String],
        http: &EndpointConfig,
        timeout: Duration,
        queue_capacity: usize,
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
        Ok(Delivery { targets })
    }

    /// Number of Alertmanagers.
    pub(super) fn len(&self) -> usize {
        self.targets.len()
    }

    /// Post `alerts` to every Alertmanager through its outbox, concurrently;
    /// what each was sent, in the order given.
    pub(super) async fn deliver(&mut self, alerts: &[PostableAlert]) -> Vec<Sent> {
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
        let mut posts = vec![None; self.targets.len()];
        while let Some(joined) = set.join_next().await {
            let Ok((i, n, result)) = joined else { continue };
            posts[i] = Some(self.settle(i, n, result));
        }
        self.targets
            .iter()
            .zip(posts)
            .map(|(t, post)| Sent {
                alertmanager: t.labels.clone(),
                post,
                queued: t.outbox.pending_len(),
                dropped: t.outbox.dropped,
            })
            .collect()
    }

    /// The outcome of posting `n` alerts to target `i`, for its outbox and
    /// the log.
    fn settle(&mut self, i: usize, n: usize, result: Result<(), PostError>) -> Post {
        let t = &mut self.targets[i];
        match result {
            Ok(()) => {
                t.outbox.delivered();
                if t.failing {
                    tracing::info!("Alertmanager {} accepts alerts again", t.client.shown_url());
                    t.failing = false;
                }
                Post::Accepted {
                    alerts: n,
                    at: SystemTime::now(),
                }
            }
            Err(e) => {
                tracing::warn!(
                    "posting {n} alert(s) failed: {e}; {} resolution(s) queued, retrying next cycle",
                    t.outbox.pending_len()
                );
                t.failing = true;
                Post::Failed
            }
        }
    }
}
