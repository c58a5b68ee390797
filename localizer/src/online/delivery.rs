//! Posting a cycle's alerts to every Alertmanager, concurrently, through
//! each one's outbox, and what each post did (for the cycle's record). A
//! `dns+` URL stands for every member its name resolves to, looked up
//! again before each delivery: a member that appears gets its own client
//! and outbox, one that is gone is dropped with them.

use super::metrics::AlertmanagerLabels;
use super::record::{Post, Sent};
use super::settings::ServiceError;
use crate::clients::alertmanager::{Outbox, PostError, PostableAlert};
use crate::clients::dns::{self, ServerUrl};
use crate::clients::{Endpoint, EndpointConfig};
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

struct Target {
    /// The member address of a `dns+` source; `None` for a fixed URL.
    addr: Option<SocketAddr>,
    client: Endpoint,
    outbox: Outbox,
    labels: AlertmanagerLabels,
    /// Whether the last post failed (logged once per outage).
    failing: bool,
}

/// One `--alertmanager` flag: a fixed URL (one target) or a `dns+` name
/// (a target per member, refreshed before each delivery).
struct Source {
    url: ServerUrl,
    targets: Vec<Target>,
    /// Whether the last lookup failed (logged once per outage).
    lookup_failing: bool,
}

/// Every Alertmanager the loop posts to.
pub(super) struct Delivery {
    sources: Vec<Source>,
    http: EndpointConfig,
    timeout: Duration,
    queue_capacity: usize,
}

impl Target {
    fn new(client: Endpoint, addr: Option<SocketAddr>, queue_capacity: usize) -> Target {
        Target {
            labels: AlertmanagerLabels {
                alertmanager: client.shown_url().to_string(),
            },
            addr,
            client,
            outbox: Outbox::new(queue_capacity),
            failing: false,
        }
    }
}

impl Delivery {
    /// One client and outbox per fixed URL; `dns+` sources get theirs at
    /// the first delivery.
    pub(super) fn new(
        urls: &[String],
        http: &EndpointConfig,
        timeout: Duration,
        queue_capacity: usize,
    ) -> Result<Delivery, ServiceError> {
        let mut sources = Vec::new();
        for given in urls {
            let url = ServerUrl::parse(given).map_err(ServiceError::AlertmanagerDns)?;
            let targets = match &url {
                ServerUrl::Fixed(u) => {
                    let client =
                        Endpoint::new(u, timeout, http).map_err(ServiceError::Alertmanager)?;
                    vec![Target::new(client, None, queue_capacity)]
                }
                ServerUrl::Dns { url: u, .. } => {
                    // Refused here, like a fixed URL, rather than at every lookup.
                    Endpoint::check(u, timeout, http).map_err(ServiceError::Alertmanager)?;
                    Vec::new()
                }
            };
            sources.push(Source {
                url,
                targets,
                lookup_failing: false,
            });
        }
        Ok(Delivery {
            sources,
            http: http.clone(),
            timeout,
            queue_capacity,
        })
    }

    /// Number of `--alertmanager` sources (a `dns+` name counts once).
    pub(super) fn len(&self) -> usize {
        self.sources.len()
    }

    /// Look every `dns+` name up again and follow its members. A failed
    /// lookup keeps the members known before: a resolver outage must not
    /// stop the alerts.
    async fn refresh(&mut self) {
        let (http, timeout, capacity) = (&self.http, self.timeout, self.queue_capacity);
        for source in &mut self.sources {
            let ServerUrl::Dns { url, host, port } = &source.url else {
                continue;
            };
            match dns::resolve(host, *port, timeout).await {
                Ok((addrs, cut)) => {
                    if source.lookup_failing {
                        tracing::info!("{host} resolves again: {} member(s)", addrs.len());
                    }
                    source.lookup_failing = false;
                    let members = Members {
                        url,
                        addrs: &addrs,
                        cut,
                    };
                    follow(&mut source.targets, members, http, timeout, capacity);
                }
                Err(e) if !source.lookup_failing => {
                    tracing::warn!(
                        "{e}; posting to the {} member(s) known before",
                        source.targets.len()
                    );
                    source.lookup_failing = true;
                }
                Err(_) => {}
            }
        }
    }

    fn targets_mut(&mut self) -> impl Iterator<Item = &mut Target> {
        self.sources.iter_mut().flat_map(|s| s.targets.iter_mut())
    }

    /// Post `alerts` to every Alertmanager through its outbox, concurrently;
    /// what each was sent, in the order given.
    pub(super) async fn deliver(&mut self, alerts: &[PostableAlert]) -> Vec<Sent> {
        self.refresh().await;
        let mut set = tokio::task::JoinSet::new();
        for (i, t) in self.targets_mut().enumerate() {
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
        let mut targets: Vec<&mut Target> = self.targets_mut().collect();
        let mut posts = vec![None; targets.len()];
        while let Some(joined) = set.join_next().await {
            let Ok((i, n, result)) = joined else { continue };
            if let Some(t) = targets.get_mut(i) {
                posts[i] = Some(settle(t, n, result));
            }
        }
        self.sources
            .iter()
            .flat_map(|s| s.targets.iter())
            .zip(posts)
            .map(|(t, post)| Sent {
                alertmanager: t.labels.clone(),
                post,
                queued: t.outbox.pending_len(),
                dropped: t.outbox.dropped,
            })
            .collect()
    }
}

/// The outcome of posting `n` alerts to `t`, for its outbox and the log.
fn settle(t: &mut Target, n: usize, result: Result<(), PostError>) -> Post {
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

/// What one lookup of a `dns+` name found.
struct Members<'a> {
    /// The URL without the prefix.
    url: &'a str,
    /// Its addresses, at most [`dns::MAX_MEMBERS`].
    addrs: &'a [SocketAddr],
    /// Whether more were left out.
    cut: bool,
}

/// Make `targets` the members found: keep the known ones (their
/// outboxes), add a client for each new one, drop those gone.
fn follow(
    targets: &mut Vec<Target>,
    Members { url, addrs, cut }: Members,
    http: &EndpointConfig,
    timeout: Duration,
    capacity: usize,
) {
    let before = targets.len();
    targets.retain(|t| t.addr.is_some_and(|a| addrs.contains(&a)));
    let gone = before - targets.len();
    let mut added = 0;
    for &addr in addrs {
        if targets.iter().any(|t| t.addr == Some(addr)) {
            continue;
        }
        match Endpoint::pinned(url, timeout, http, addr) {
            Ok(client) => {
                targets.push(Target::new(client, Some(addr), capacity));
                added += 1;
            }
            Err(e) => tracing::warn!("Alertmanager member {addr}: {e}"),
        }
    }
    targets.sort_by_key(|t| t.addr);
    if added + gone > 0 {
        tracing::info!(
            "Alertmanager members of {}: {} ({added} new, {gone} gone{})",
            crate::clients::http::redact_url(url),
            targets.len(),
            if cut { "; more left out" } else { "" }
        );
    }
}
