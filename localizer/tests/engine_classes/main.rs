//! Failure classes of the blind generator, on small hand-built windows shaped like
//! production logs (one spine per ToR, a cross-ToR pair over two spines
//! when its ToRs hang off different ones; each extra switch tier costs a
//! few µs): every test failed on the engine before the fix it names.
//!
//! Deterministic: per-pair jitter and loss come from a hash of the pair,
//! so each window is one fixed draw.

use skeletonhunter_common::topology::{Identity, Kind};
use skeletonhunter_localizer::{analyze, Config, PairStats, Report};

mod blips;
mod edges;
mod gray_loss;
mod latency;
mod partial;
mod spines;
mod stacked;
mod unreachable;

/// A fabric: `spine_of[t]` is the spine of ToR `t`; `hosts` hosts per
/// ToR, two containers per host sharing its NIC.
struct Fabric {
    spine_of: Vec<usize>,
    hosts: usize,
}

/// What is wrong, per component: extra loss rate and extra RTT (µs).
#[derive(Default, Clone, Copy)]
struct Effect {
    loss: f64,
    delay_us: f64,
}

fn id(kind: &str, n: usize) -> String {
    format!("{kind}-{n}")
}

fn identity(f: &Fabric, tor: usize, host: usize, c: usize) -> Identity {
    let h = tor * f.hosts + host;
    Identity {
        node: id("node", h * 2 + c),
        nic: id("nic", h),
        host: id("host", h),
        tor: id("tor", tor),
        spine: id("spine", f.spine_of[tor]),
        ..Default::default()
    }
}

/// A uniform draw in [0, 1) from a string.
fn unit(s: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Lost probes of `n` at rate `p`: one Bernoulli draw per probe from a
/// generator seeded by `key`.
fn binomial(n: f64, p: f64, key: &str) -> f64 {
    let mut x = (unit(key) * (1u64 << 53) as f64) as u64 | 1;
    let mut lost = 0.0;
    for _ in 0..n as u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if ((x >> 11) as f64 / (1u64 << 53) as f64) < p {
            lost += 1.0;
        }
    }
    lost
}

/// The window: same-host pairs between a host's two containers, a ring
/// over each ToR's hosts, and host i of every ToR to host i of every other
/// ToR. `effect(kind, id)` says what each component does; `probes` per
/// pair in all (rounds of 10).
fn window(f: &Fabric, probes: f64, effect: &dyn Fn(Kind, &str) -> Effect) -> Vec<PairStats> {
    window_with(f, probes, 1e-4, effect)
}

/// [`window`] with a background loss rate.
fn window_with(
    f: &Fabric,
    probes: f64,
    background: f64,
    effect: &dyn Fn(Kind, &str) -> Effect,
) -> Vec<PairStats> {
    let tors = f.spine_of.len();
    let mut pairs = Vec::new();
    for t in 0..tors {
        for h in 0..f.hosts {
            pairs.push((identity(f, t, h, 0), identity(f, t, h, 1)));
            pairs.push((identity(f, t, h, 0), identity(f, t, (h + 1) % f.hosts, 0)));
            for u in t + 1..tors {
                pairs.push((identity(f, t, h, 1), identity(f, u, h, 1)));
            }
        }
    }
    pairs
        .into_iter()
        .map(|(a, b)| {
            let path = skeletonhunter_common::topology::path(&a, &b);
            let (mut survive, mut delay) = (1.0 - background, 0.0);
            for c in &path {
                let e = effect(c.kind, &c.id);
                survive *= 1.0 - e.loss;
                delay += e.delay_us;
            }
            let spines = path.iter().filter(|c| c.kind == Kind::Spine).count();
            let tors_crossed = path.iter().filter(|c| c.kind == Kind::Tor).count();
            let base = match (tors_crossed, spines) {
                (0, _) => 11.0,
                (1, _) => 15.0,
                (_, 1) => 17.6,
                _ => 20.2,
            };
            let key = format!("{}>{}", a.node, b.node);
            let rtt = base + (unit(&format!("rtt{key}")) - 0.5) + delay;
            let lost = binomial(probes, 1.0 - survive, &format!("loss{key}"));
            PairStats {
                src: a,
                dst: b,
                rounds: probes / 10.0,
                sent: probes,
                lost,
                rtt_seconds: Some(rtt * 1e-6),
                rtt_samples: probes / 10.0,
                ..Default::default()
            }
        })
        .collect()
}

/// Gives container `node`'s pairs, in window order, one value each of
/// `values` through `set`; the container must have exactly that many pairs.
fn on_pairs_of(
    pairs: &mut [PairStats],
    node: &str,
    values: &[f64],
    set: impl Fn(&mut PairStats, f64),
) {
    let mine: Vec<&mut PairStats> = pairs
        .iter_mut()
        .filter(|p| p.src.node == node || p.dst.node == node)
        .collect();
    assert_eq!(mine.len(), values.len(), "pairs of {node}");
    for (p, &v) in mine.into_iter().zip(values) {
        set(p, v);
    }
}

/// Drops container `node`'s pairs beyond its first `keep`, in window order
/// (the others missing from the window).
fn keep_pairs_of(pairs: &mut Vec<PairStats>, node: &str, keep: usize) {
    let mut mine = 0;
    pairs.retain(|p| {
        let is_mine = p.src.node == node || p.dst.node == node;
        mine += is_mine as usize;
        !is_mine || mine <= keep
    });
}

/// Records each pair's lost probes as lost one per round (a background
/// that drops probes one by one), so that the burst rule can read the
/// rounds.
fn lost_one_by_one(pairs: &mut [PairStats]) {
    for p in pairs {
        p.lossy_rounds = Some(p.lost);
    }
}

/// Moves container `node` to a NIC of its own, `nic`, on the same host.
fn on_own_nic(pairs: &mut [PairStats], node: &str, nic: &str) {
    for p in pairs {
        for end in [&mut p.src, &mut p.dst] {
            if end.node == node {
                end.nic = nic.into();
            }
        }
    }
}

fn named(r: &Report) -> Vec<String> {
    r.faults
        .iter()
        .map(|f| format!("{}:{}:{}", f.kind, f.id, f.symptom))
        .collect()
}

/// What the engine names on a window of `f`, 100 probes a pair, with
/// `effect`.
fn blamed(f: &Fabric, effect: &dyn Fn(Kind, &str) -> Effect) -> Vec<String> {
    named(&analyze(&window(f, 100.0, effect), &Config::default()))
}

/// Asserts that the engine names exactly `expected` (sorted) on `pairs`,
/// with every verdict's evidence in the failure message.
fn assert_names(pairs: &[PairStats], expected: &[&str]) {
    let report = analyze(pairs, &Config::default());
    let mut names = named(&report);
    names.sort();
    assert_eq!(names, expected, "{}", detail(&report));
}

/// Every verdict with its evidence, for failure messages.
fn detail(r: &Report) -> String {
    r.faults
        .iter()
        .map(|f| {
            format!(
                "{}:{}:{} score {:.4} p {:.1e} pairs {}\n",
                f.kind, f.id, f.symptom, f.score, f.p_value, f.pairs
            )
        })
        .collect()
}

/// The report on a window of `f` where component `id` of `kind` loses
/// `loss` of every flow: 80 probes a pair (8 rows of 10) over a 0.1%
/// background, where one or two lost probes are no sign.
fn gray(f: &Fabric, kind: Kind, id: &str, loss: f64) -> Report {
    let pairs = window_with(f, 80.0, 1e-3, &|k, i| Effect {
        loss: if k == kind && i == id { loss } else { 0.0 },
        ..Default::default()
    });
    analyze(&pairs, &Config::default())
}

/// Twelve ToRs over three spines, 16 hosts, rows of 10 probes × 9 rounds
/// over a 0.1% background, with spine-1 losing 2% of every flow and
/// container `node` losing `loss`.
fn gray_spine_and_container(node: &str, loss: f64) -> Vec<PairStats> {
    let f = Fabric {
        spine_of: (0..12).map(|t| t / 4).collect(),
        hosts: 16,
    };
    window_with(&f, 90.0, 1e-3, &|k, i| Effect {
        loss: match (k, i) {
            (Kind::Spine, "spine-1") => 0.02,
            (Kind::Node, n) if n == node => loss,
            _ => 0.0,
        },
        ..Default::default()
    })
}
