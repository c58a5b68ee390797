//! The name book's unit tests and its property test: any sequence of
//! peers arriving (named or not, replacing one at the same address as the
//! scheduler does), replies claiming names, and peers leaving keeps every
//! label of a live peer to one address, counts every refused claim exactly
//! once, and refuses a claim only when another live peer holds the name.

use super::*;
use crate::fuzz::mutate::Rng;
use crate::model::{Peer, PeerSource};
use crate::probe::{NodeClaim, PeerInfo, Ports, Target};
use crate::telemetry::Metrics;
use std::sync::Arc;

fn owner(last: u8, token: u64) -> Owner {
    Owner {
        addr: IpAddr::from([10, 0, 0, last]),
        token,
    }
}

#[test]
fn a_name_has_one_owner_and_is_free_when_released() {
    let mut pins = NamePins::default();
    assert_eq!(pins.claim("b", owner(1, 1)), Ok(()));
    assert_eq!(pins.claim("b", owner(1, 1)), Ok(()));
    let taken = Err(Refusal::Owned(IpAddr::from([10, 0, 0, 1])));
    assert_eq!(pins.claim("b", owner(2, 2)), taken);
    // Another address's label is not a name one may take; one's own is.
    assert_eq!(
        pins.claim("10.0.0.1", owner(2, 2)),
        Err(Refusal::OtherAddress)
    );
    assert_eq!(pins.claim("10.0.0.2", owner(2, 2)), Ok(()));
    // A fresh target at the same address takes the name over; the old
    // one's release is then a no-op.
    assert_eq!(pins.claim("b", owner(1, 3)), Ok(()));
    pins.release("b", owner(1, 1));
    assert_eq!(pins.owner("b"), Some(owner(1, 3)));
    pins.release("b", owner(1, 3));
    assert_eq!(pins.owner("b"), None);
    assert_eq!(pins.name(IpAddr::from([10, 0, 0, 1])), None);
    assert_eq!(pins.claim("b", owner(2, 2)), Ok(()));
    assert_eq!(pins.len(), 2);
}

const ADDRS: u8 = 5;
const NAMES: [&str; 6] = ["a", "b", "c", "", "10.0.0.1", "10.0.0.2"];

struct World {
    metrics: Arc<Metrics>,
    info: Arc<PeerInfo>,
    live: Vec<Arc<Target>>,
}

impl World {
    fn new() -> World {
        let metrics = Arc::new(Metrics::new(&Default::default()));
        let info = PeerInfo::new(metrics.clone(), None);
        World {
            metrics,
            info,
            live: Vec::new(),
        }
    }

    /// A peer at `addr` (re)appears, as in `Scheduler::sync_targets`.
    fn arrive(&mut self, addr: IpAddr, name: Option<&str>) {
        let mut peer = Peer::new(addr, PeerSource::Static);
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            peer = peer.with_name(n);
        }
        let before = self.metrics.identity_conflicts();
        let fresh = Target::new(
            peer,
            Ports { udp: 1, tcp: 2 },
            self.metrics.clone(),
            self.info.clone(),
        );
        let refused = u64::from(
            fresh
                .peer
                .name
                .as_deref()
                .is_some_and(|n| n != fresh.dst_node()),
        );
        assert_eq!(self.metrics.identity_conflicts(), before + refused);
        if let Some(i) = self.live.iter().position(|t| t.addr() == addr) {
            let old = self.live.swap_remove(i);
            if old.identity_learned() && fresh.peer.name.is_none() {
                fresh.learn_node(&old.dst_node());
            }
            old.retire();
        }
        self.live.push(Arc::new(fresh));
    }

    /// A reply from live peer `i` claims `name`.
    fn claim(&mut self, i: usize, name: &str) {
        let t = &self.live[i];
        let holder = self
            .live
            .iter()
            .find(|o| o.addr() != t.addr() && o.dst_node() == name)
            .map(|o| o.addr());
        let before = self.metrics.identity_conflicts();
        let label = t.dst_node();
        let claim = t.learn_node(name);
        let counted = self.metrics.identity_conflicts() - before;
        let refused = matches!(claim, NodeClaim::Conflict { .. } | NodeClaim::Taken);
        assert_eq!(counted, u64::from(refused), "{claim:?} for {name:?}");
        if name.is_empty() {
            return assert_eq!(claim, NodeClaim::Same);
        }
        assert_eq!(t.dst_node() == name, !refused, "{claim:?} for {name:?}");
        if claim == NodeClaim::Taken {
            // Refused only for a name another live peer holds or another
            // address, and the label did not move.
            let other_addr = name.parse::<IpAddr>().is_ok_and(|a| a != t.addr());
            assert!(holder.is_some() || other_addr, "{name:?} refused but free");
            assert_eq!(t.dst_node(), label);
        }
    }

    /// No label is used by two live addresses, and every name label is
    /// the one its peer holds in the book.
    fn check(&self) {
        let mut seen: HashMap<String, IpAddr> = HashMap::new();
        for t in &self.live {
            let label = t.dst_node();
            if let Some(other) = seen.insert(label.clone(), t.addr()) {
                panic!("{label:?} used by {other} and {}", t.addr());
            }
            if label != t.addr().to_string() {
                assert_eq!(self.info.name(t.addr()).as_deref(), Some(label.as_str()));
            }
        }
    }
}

#[test]
fn any_sequence_of_peers_and_claims_keeps_names_apart_and_counts_conflicts() {
    for seed in 0..400u64 {
        let mut rng = Rng::new(seed);
        let mut w = World::new();
        for _ in 0..200 {
            let addr = IpAddr::from([10, 0, 0, 1 + rng.below(ADDRS as usize) as u8]);
            match rng.below(10) {
                0..=2 => {
                    let name = (!rng.one_in(2)).then(|| *rng.pick(&NAMES));
                    w.arrive(addr, name);
                }
                3 if !w.live.is_empty() => {
                    let i = rng.below(w.live.len());
                    w.live.swap_remove(i).retire();
                }
                _ if !w.live.is_empty() => {
                    let i = rng.below(w.live.len());
                    let name = *rng.pick(&NAMES);
                    w.claim(i, name);
                }
                _ => {}
            }
            w.check();
        }
        // Everything gone: every name is free again.
        for t in w.live.drain(..) {
            t.retire();
        }
        assert!(
            w.info_is_empty(),
            "seed {seed}: names left after every peer left"
        );
    }
}

impl World {
    fn info_is_empty(&self) -> bool {
        (1..=ADDRS).all(|i| self.info.name(IpAddr::from([10, 0, 0, i])).is_none())
    }
}
