//! A peer cannot choose its `dst_node` label: an exporter in namespace A
//! probes 198.18.1.2, where the test itself answers every UDP echo in the
//! wire format (docs/exporter.md, "UDP echo wire format") from a real
//! socket — naming itself differently in every reply. The first name is
//! pinned (or the configured one, when the peer has a name in the
//! configuration); every other claim is counted in
//! `skeletonhunter_peer_identity_conflicts_total`, logged at most once a
//! minute, and makes no new series. And a second real exporter saying
//! `--node b` from another address cannot take the live `b`'s name: its
//! series stay apart (under its address) and its loss never lands on `b`.

use anyhow::Result;
use skeletonhunter_tests::exporter::{
    config, counts, pair, scrape, start, start_both, FakePeer, Pair, Probing, UDP,
};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::netns::{veth, Netns};
use skeletonhunter_tools::servers::TempDir;
use skeletonhunter_tools::wait_until;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A peer at 198.18.1.2 answering every echo request, calling itself
/// `name-<n>` in reply n (n = 1, 2, …). Stops when dropped.
struct RenamingPeer {
    replies: Arc<AtomicU64>,
    _peer: FakePeer,
}

impl RenamingPeer {
    fn start(p: &Pair, name: &'static str) -> Result<RenamingPeer> {
        let replies = Arc::new(AtomicU64::new(0));
        let r = replies.clone();
        let addr = SocketAddr::from(([198, 18, 1, 2], UDP));
        let peer = FakePeer::start(&p.b, addr, move |sock, req, from| {
            let k = r.fetch_add(1, Ordering::Relaxed) + 1;
            let _ = sock.send_to(&reply(req, &format!("{name}-{k}")), from);
        })?;
        Ok(RenamingPeer {
            replies,
            _peer: peer,
        })
    }
}

/// The reply to `req` naming the responder `node`: the request's header
/// with type 2 and no holding time, then the node TLV (type 1).
fn reply(req: &[u8], node: &str) -> Vec<u8> {
    let mut out = req[..40].to_vec();
    out[5] = 2;
    out[32..40].fill(0);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(node.len() as u16).to_be_bytes());
    out.extend_from_slice(node.as_bytes());
    out
}

/// The `dst_node` values of A's probe series.
fn dst_nodes(body: &str) -> BTreeSet<String> {
    body.lines()
        .filter(|l| l.starts_with("skeletonhunter_probe_sent_total{"))
        .filter_map(|l| l.split("dst_node=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

/// A's exporter probing the renaming peer (`peer_line`: its static entry),
/// until the peer has given 50 names; then A's metrics and log.
fn probe_renaming_peer(tag: &str, peer_line: &str) -> Result<(String, String, u64)> {
    let p = pair(tag)?;
    let dir = TempDir::new(tag)?;
    let fake = RenamingPeer::start(&p, "impostor")?;
    let discovery = format!("  static:\n    - {peer_line}\n");
    let mut a = start(
        &p.a,
        dir.path(),
        "a",
        &config("a", "198.18.1.1", "20ms", "200ms", "udp", &discovery),
    )?;
    wait_until(
        "50 differently named replies",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || (fake.replies.load(Ordering::Relaxed) >= 50).then_some(()),
    )?;
    // Let the last replies be processed before reading the counters.
    let body = wait_until(
        "conflicts counted",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            let c = sample(&body, "skeletonhunter_peer_identity_conflicts_total", &[])?;
            (c >= 45.0).then_some(body)
        },
    )?;
    a.check_running()?;
    let replies = fake.replies.load(Ordering::Relaxed);
    Ok((body, a.log(), replies))
}

#[test]
fn a_peer_renaming_itself_every_reply_makes_no_new_series() {
    if !require_privileges("a_peer_renaming_itself_every_reply_makes_no_new_series") {
        return;
    }
    let (body, log, replies) = probe_renaming_peer("exident", "{address: \"198.18.1.2\"}").unwrap();
    // The first name it gave is the only label its series ever had.
    assert_eq!(
        dst_nodes(&body),
        BTreeSet::from(["impostor-1".to_string()]),
        "{body}"
    );
    let conflicts = sample(&body, "skeletonhunter_peer_identity_conflicts_total", &[]).unwrap();
    assert!(
        conflicts <= replies as f64 - 1.0,
        "{conflicts} conflicts for {replies} replies"
    );
    assert!(!body.contains("impostor-2\""), "{body}");
    // Logged, but not once per reply.
    let lines = log.matches("claims another node name").count();
    assert!((1..=2).contains(&lines), "{lines} conflict lines:\n{log}");
}

#[test]
fn a_configured_peer_name_is_never_replaced_by_a_reply() {
    if !require_privileges("a_configured_peer_name_is_never_replaced_by_a_reply") {
        return;
    }
    let (body, _log, replies) = probe_renaming_peer(
        "exidcfg",
        "{address: \"198.18.1.2\", name: \"b-configured\"}",
    )
    .unwrap();
    assert_eq!(
        dst_nodes(&body),
        BTreeSet::from(["b-configured".to_string()]),
        "{body}"
    );
    // Every reply conflicts with the configured name.
    let conflicts = sample(&body, "skeletonhunter_peer_identity_conflicts_total", &[]).unwrap();
    assert!(
        conflicts >= 45.0 && conflicts <= replies as f64,
        "{conflicts} / {replies}"
    );
    assert!(!body.contains("impostor"), "{body}");
}

/// A's exporter probing two exporters that both say they are `b`: the
/// real one at 198.18.1.2 (started first, so `b` is pinned to it) and an
/// impostor at 198.18.2.2 on a second link. The impostor keeps its address
/// label and every reply of it is a counted conflict; once it is killed,
/// its loss lands on its own series, never on `b`'s.
#[test]
fn a_second_exporter_cannot_take_a_live_peers_name() {
    if !require_privileges("a_second_exporter_cannot_take_a_live_peers_name") {
        return;
    }
    let p = pair("exidtwo").unwrap();
    let c = Netns::new("exidtwoc").unwrap();
    veth(&p.a, "a1", "198.18.2.1/24", &c, "c0", "198.18.2.2/24").unwrap();
    let dir = TempDir::new("exidtwo").unwrap();
    let peers = "  static:\n    - {address: \"198.18.1.2\"}\n    - {address: \"198.18.2.2\"}\n";
    let probing = Probing {
        interval: "50ms",
        timeout: "2s",
        protocols: "udp",
    };
    let (mut a, _b) = start_both(&p, dir.path(), probing, peers, "").unwrap();
    let udp =
        |body: &str, dst: &str| counts(body, &format!("dst_node=\"{dst}\""), "protocol=\"udp\"");
    let answered = |body: &str, dst: &str| udp(body, dst).2;
    wait_until(
        "the real b answering under its name",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || (answered(&scrape(&p.a).ok()?, "b") >= 5.0).then_some(()),
    )
    .unwrap();
    let impostor_cfg = probing.config("b", "198.18.2.2", "");
    let impostor = start(&c, dir.path(), "impostor", &impostor_cfg).unwrap();
    let body = wait_until(
        "the impostor's replies counted as conflicts",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            let conflicts = sample(&body, "skeletonhunter_peer_identity_conflicts_total", &[])?;
            (conflicts >= 5.0 && answered(&body, "198.18.2.2") >= 5.0).then_some(body)
        },
    )
    .unwrap();
    assert_eq!(
        dst_nodes(&body),
        BTreeSet::from(["b".to_string(), "198.18.2.2".to_string()]),
        "{body}"
    );
    // Killed (SIGKILL, as in a crash): no departure notice, so its
    // silence is loss.
    drop(impostor);
    let body = wait_until(
        "the impostor's loss counted",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let body = scrape(&p.a).ok()?;
            (udp(&body, "198.18.2.2").1 >= 10.0).then_some(body)
        },
    )
    .unwrap();
    a.check_running().unwrap();
    let (sent_b, lost_b, _) = udp(&body, "b");
    assert!(sent_b > 0.0, "{body}");
    assert_eq!(lost_b, 0.0, "the impostor's loss landed on b:\n{body}");
    let log = a.log();
    assert!(
        log.contains("claims a node name another live peer holds"),
        "no conflict logged:\n{log}"
    );
}
