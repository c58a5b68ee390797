#!/usr/bin/env python3
"""Blind test-data generator for SkeletonHunter's offline `analyze`.

Written only from the CSV schema, the stated path model and a list of failure
classes -- never from the engine's source, its tests or its simulator.  One
"window" is a CSV of ping rows (production's 45-column header, UTF-8 BOM,
10 probes per row) plus a truth JSON naming the injected faults.

Replay one window:  blindgen.py --seed S --index I --size SIZE --out DIR
Standard library only.
"""
import argparse
import hashlib
import json
import math
import os
import random
import sys

HEADER = (
    "agent_type,dial,dscp,dst_asw,dst_cluster_id,dst_cluster_name,dst_dsw,dst_idc,"
    "dst_ip,dst_logic_site,dst_node_id,dst_node_sn,dst_pod,dst_port,dst_real_ip,"
    "dst_region_id,dst_region_name,dst_tenant_id,dst_zone_id,extra_stats,host_ip,"
    "latency,loss_rate,ping_time,ptp_ts,route,src_asw,src_cluster_id,"
    "src_cluster_name,src_dsw,src_idc,src_ip,src_logic_site,src_node_id,"
    "src_node_sn,src_pod,src_port,src_real_ip,src_region_id,src_region_name,"
    "src_security_domain,src_tenant_id,src_zone_id,task_start_time,task_type"
).split(",")
VARIABLE = ("dial", "latency", "loss_rate", "ping_time", "src_port", "task_start_time")
PROBES = 10
LOSS_TEXT = ["0"] + ["0.%d" % k for k in range(1, 10)] + ["1"]
KINDS = ("node", "nic", "host", "tor", "spine")
SIZES = ("small", "medium", "large")
# Topology column (per side) -> component kind it names.
SIDE_KIND = {"node_id": "node", "real_ip": "nic", "node_sn": "host",
             "asw": "tor", "dsw": "spine", "pod": "pod"}

# The scenario mix, decided before any score was seen and frozen.
MIX = (
    ("healthy", 0.17),
    ("single_loss", 0.20),       # 5-30 % loss on one component
    ("single_gray", 0.10),       # 2-5 % loss on one component
    ("single_latency", 0.14),    # +30..200 us on one component
    ("single_unreachable", 0.10),  # dials fail: all or 30-80 % of them
    ("majority_spine", 0.08),    # the spine carrying most cross-ToR pairs
    ("ecmp_spine", 0.09),        # 25-50 % of a spine's flows hit
    ("stacked", 0.12),           # two faults at once
)
MIN_PAIRS = {"node": 2, "nic": 2, "host": 3, "tor": 3, "spine": 4}


def hexid(rng):
    return "%032x" % rng.getrandbits(128)


def flow_hash(salt, a, b):
    """Deterministic value in [0,1) per (undirected) flow, for ECMP hits."""
    key = "%s|%s|%s" % ((salt,) + tuple(sorted((a, b))))
    return int(hashlib.md5(key.encode()).hexdigest()[:8], 16) / 2.0 ** 32


# ---------------------------------------------------------------- path model

def path_of(sa, sb):
    """Components a probe between two endpoints crosses (the stated contract).

    sa/sb map side kinds (node, nic, host, tor, spine, pod) to ids; the result
    is a set of (kind, id).  Same host: endpoints, NICs, host.  Same ToR: plus
    the ToR.  Otherwise both ToRs, both spines and (our scoring convention for
    `pod` reports) the pods of both ends.
    """
    comps = {("node", sa["node"]), ("nic", sa["nic"]), ("host", sa["host"]),
             ("node", sb["node"]), ("nic", sb["nic"]), ("host", sb["host"])}
    if sa["host"] == sb["host"]:
        return comps
    comps.add(("tor", sa["tor"]))
    if sa["tor"] == sb["tor"]:
        return comps
    comps.update({("tor", sb["tor"]), ("spine", sa["spine"]), ("spine", sb["spine"]),
                  ("pod", sa["pod"]), ("pod", sb["pod"])})
    return comps


def path_class(sa, sb):
    if sa["nic"] == sb["nic"]:
        return "same_nic"
    if sa["host"] == sb["host"]:
        return "same_host"
    if sa["tor"] == sb["tor"]:
        return "same_tor"
    return "same_spine" if sa["spine"] == sb["spine"] else "cross_spine"


BASE_US = {"same_nic": 9.0, "same_host": 11.5, "same_tor": 14.5,
           "same_spine": 17.0, "cross_spine": 19.5}


# ------------------------------------------------------------------- fabric

def fabric_shape(rng, size):
    if size == "small":
        rails = rng.randint(2, 4)
        segs = rng.choice((1, 1, 2))
        per_seg = rng.randint(8, 16) if segs == 1 else rng.randint(4, 16)
        return dict(rails=rails, segments=segs, per_seg=per_seg,
                    spines=rng.randint(2, 4), pods=1)
    if size == "medium":
        return dict(rails=8, segments=rng.randint(2, 4), per_seg=16,
                    spines=rng.randint(2, 6), pods=rng.choice((1, 2)))
    return dict(rails=8, segments=rng.randint(8, 16), per_seg=16,
                spines=rng.randint(4, 8), pods=rng.randint(2, 4))


def assign_spines(rng, n_tors, n_spines):
    """ToR -> spine block index, skewed: block 0 sits above 40-70 % of ToRs."""
    heavy = rng.uniform(0.4, 0.7)
    out = [0 if rng.random() < heavy else rng.randrange(1, n_spines)
           for _ in range(n_tors)]
    for s in range(n_spines):           # every block above at least one ToR
        if s not in out and n_tors > n_spines:
            out[rng.randrange(n_tors)] = s
    return out


def build_fabric(rng, size):
    shape = fabric_shape(rng, size)
    rails, segs, per_seg = shape["rails"], shape["segments"], shape["per_seg"]
    spines = [hexid(rng) for _ in range(shape["spines"])]
    pods = [hexid(rng) for _ in range(shape["pods"])]
    tors = [[hexid(rng) for _ in range(rails)] for _ in range(segs)]
    tor_spine = assign_spines(rng, segs * rails, len(spines))
    tenants = [hexid(rng) for _ in range(rng.choice((1, 1, 2)))]
    two_per_nic = rng.uniform(0.0, 0.5)
    conts, hosts = [], []
    for s in range(segs):
        pod = pods[s * len(pods) // segs]
        for h in range(per_seg):
            host = {"sn": hexid(rng), "ip": hexid(rng), "seg": s, "idx": h,
                    "clock_ns": rng.randint(-2_000_000, 2_000_000), "conts": []}
            tenant = rng.choice(tenants)
            hosts.append(host)
            for k in range(rails):
                nic = hexid(rng)
                for _ in range(2 if rng.random() < two_per_nic else 1):
                    c = {"node": hexid(rng), "nic": nic, "host": host["sn"],
                         "tor": tors[s][k], "spine": spines[tor_spine[s * rails + k]],
                         "pod": pod, "tenant": tenant, "ip": hexid(rng),
                         "host_ip": host["ip"], "seg": s, "hidx": h, "rail": k,
                         "clock_ns": host["clock_ns"], "i": len(conts)}
                    conts.append(c)
                    host["conts"].append(c)
    site = {k: hexid(rng) for k in ("cluster_name", "idc", "logic_site", "region_id",
                                    "region_name", "zone_id", "security_domain")}
    return {"shape": shape, "conts": conts, "hosts": hosts, "site": site,
            "spines": spines}


def skeleton_pairs(rng, fab):
    """Stable, sparse probe peers: ring on the rail, same host, cross segment."""
    conts, shape = fab["conts"], fab["shape"]
    by_slot = {}
    for c in conts:
        by_slot.setdefault((c["seg"], c["hidx"], c["rail"]), []).append(c)
    pairs = set()
    for c in conts:
        s, h, k = c["seg"], c["hidx"], c["rail"]
        cands = [by_slot[(s, (h + 1) % shape["per_seg"], k)][0]]
        if rng.random() < 0.3:
            cands.append(by_slot[(s, h, (k + 1) % shape["rails"])][0])
        if shape["segments"] > 1:
            cands.append(by_slot[((s + 1) % shape["segments"], h, k)][0])
        if rng.random() < 0.4:
            cands.append(rng.choice(conts))
        mates = by_slot[(s, h, k)]
        if len(mates) > 1 and rng.random() < 0.5:
            cands.append(mates[1] if mates[0] is c else mates[0])
        for d in cands:
            if d is not c and rng.random() > 0.04:   # partial coverage
                pairs.add((c["i"], d["i"]))
    return sorted(pairs)


# ---------------------------------------------------------------- scenarios

def comp_pairs(fab, pairs):
    """(kind, id) -> list of pair indexes crossing it, under the path model."""
    out = {}
    conts = fab["conts"]
    for pi, (a, b) in enumerate(pairs):
        for comp in path_of(conts[a], conts[b]):
            out.setdefault(comp, []).append(pi)
    return out


def pick_component(rng, cp, kind, exclude=(), churned=()):
    cands = [c for c, ps in cp.items() if c[0] == kind and len(ps) >= MIN_PAIRS[kind]
             and c not in exclude and c[1] not in churned]
    return rng.choice(sorted(cands)) if cands else None


def draw_effect(rng, symptom, gray=False):
    if symptom == "loss":
        return {"loss": rng.uniform(0.02, 0.05) if gray else rng.uniform(0.05, 0.30)}
    if symptom == "latency":
        return {"latency_us": 30.0 * 2 ** rng.uniform(0.0, 2.74)}
    return {"fail": 1.0 if rng.random() < 0.5 else rng.uniform(0.3, 0.8)}


def make_fault(comp, symptom, effect, hit=None):
    f = {"kind": comp[0], "id": comp[1], "symptom": symptom}
    f.update(effect)
    if hit is not None:
        f["hit_pairs"] = sorted(hit)
    return f


def single_fault(rng, cp, symptom, gray=False, exclude=(), churned=()):
    for _ in range(20):
        comp = pick_component(rng, cp, rng.choice(KINDS), exclude, churned)
        if comp is not None:
            return make_fault(comp, symptom, draw_effect(rng, symptom, gray))
    return None


def majority_spine(rng, cp, fab):
    spines = [(len(cp.get(("spine", s), ())), s) for s in fab["spines"]]
    n, sid = max(spines)
    if n < MIN_PAIRS["spine"]:
        return None
    symptom = rng.choice(("loss", "loss", "latency"))
    eff = ({"loss": rng.uniform(0.03, 0.20)} if symptom == "loss"
           else draw_effect(rng, "latency"))
    return make_fault(("spine", sid), symptom, eff)


def ecmp_spine(rng, cp, pairs, fab):
    conts = fab["conts"]
    for _ in range(10):
        comp = pick_component(rng, cp, "spine")
        if comp is None or len(cp[comp]) < 8:
            continue
        frac, salt = rng.uniform(0.25, 0.50), hexid(rng)
        hit = [pi for pi in cp[comp] if flow_hash(salt, conts[pairs[pi][0]]["node"],
                                                  conts[pairs[pi][1]]["node"]) < frac]
        if len(hit) < 2:
            continue
        symptom = rng.choice(("loss", "loss", "latency", "unreachable"))
        f = make_fault(comp, symptom, draw_effect(rng, symptom), hit)
        f["ecmp_fraction"] = round(frac, 3)
        return f
    return None


STACK_RECIPES = (
    (("nic", "loss", (0.25, 0.35)), ("spine", "loss", (0.08, 0.12))),
    (("node", "loss", (0.02, 0.03)), ("spine", "loss", (0.02, 0.03))),
    (("host", "latency", None), ("tor", "loss", (0.05, 0.15))),
)


def stacked(rng, cp, churned):
    if rng.random() < 0.5:
        recipe, out = rng.choice(STACK_RECIPES), []
        for kind, symptom, rng_loss in recipe:
            comp = pick_component(rng, cp, kind, [(f["kind"], f["id"]) for f in out],
                                  churned)
            if comp is None:
                return None
            eff = ({"loss": rng.uniform(*rng_loss)} if rng_loss
                   else draw_effect(rng, symptom))
            out.append(make_fault(comp, symptom, eff))
    else:
        first = single_fault(rng, cp, rng.choice(("loss", "latency", "unreachable")),
                             churned=churned)
        if first is None:
            return None
        second = single_fault(rng, cp, rng.choice(("loss", "latency", "unreachable")),
                              exclude=[(first["kind"], first["id"])], churned=churned)
        out = [first, second] if second else None
    if out and set(cp[(out[0]["kind"], out[0]["id"])]) == set(cp[(out[1]["kind"], out[1]["id"])]):
        return None                       # indistinguishable: not a real stack
    return out


def draw_class(rng, only):
    names = [n for n, _ in MIX]
    weights = [w for _, w in MIX]
    return rng.choices(names, weights)[0] if only is None else only


def scenario(rng, cls, cp, pairs, fab, churned):
    """The truth for a window class, or None when the fabric cannot host it."""
    if cls == "healthy":
        return []
    if cls == "single_loss":
        f = single_fault(rng, cp, "loss", churned=churned)
    elif cls == "single_gray":
        f = single_fault(rng, cp, "loss", gray=True, churned=churned)
    elif cls == "single_latency":
        f = single_fault(rng, cp, "latency", churned=churned)
    elif cls == "single_unreachable":
        f = single_fault(rng, cp, "unreachable", churned=churned)
    elif cls == "majority_spine":
        f = majority_spine(rng, cp, fab)
    elif cls == "ecmp_spine":
        f = ecmp_spine(rng, cp, pairs, fab)
    else:
        return stacked(rng, cp, churned)
    return [f] if f else None


def fault_tags(cls, faults):
    tags = {cls}
    for f in faults:
        tags.add("%s_%s" % (f["kind"], f["symptom"]))
        tags.update((f["kind"], f["symptom"]))
    return sorted(tags)


# -------------------------------------------------------------------- noise

def draw_noise(rng, n_pairs, rounds, healthy):
    noise = {"missing": rng.uniform(0.005, 0.03), "spike": rng.uniform(0.002, 0.01),
             "base_loss": 1e-4, "noisy_pairs": [], "blips": []}
    n_noisy = rng.randint(1, 2) if healthy or rng.random() < 0.5 else 0
    for _ in range(n_noisy):
        noise["noisy_pairs"].append({"pair": rng.randrange(n_pairs),
                                     "jitter_us": rng.uniform(5, 15),
                                     "loss_row_p": rng.uniform(0.03, 0.12)})
    if healthy or rng.random() < 0.5:
        r = rng.randrange(rounds)
        for _ in range(rng.randint(2, 6)):
            noise["blips"].append({"pair": rng.randrange(n_pairs), "round": r,
                                   "loss_k": rng.randint(1, 3),
                                   "extra_us": rng.choice((0.0, rng.uniform(30, 120)))})
    return noise


def draw_churn(rng, fab, rounds):
    """Containers that arrive late or leave early: id -> [first, end) rounds."""
    life = {}
    if rounds < 6:
        return life
    for c in fab["conts"]:
        if rng.random() < 0.03:
            if rng.random() < 0.5:
                life[c["i"]] = (rng.randint(2, rounds // 2), rounds)
            else:
                life[c["i"]] = (0, rng.randint(rounds // 2, rounds - 1))
    return life


# --------------------------------------------------------------------- rows

def pair_effects(faults, cp, n_pairs):
    """Per pair index: [loss, added latency us, dial-failure share]."""
    eff = [None] * n_pairs
    for f in faults:
        hit = f.get("hit_pairs")
        for pi in (hit if hit is not None else cp.get((f["kind"], f["id"]), ())):
            e = eff[pi] or [0.0, 0.0, 0.0]
            e[0] = 1 - (1 - e[0]) * (1 - f.get("loss", 0.0))
            e[1] += f.get("latency_us", 0.0)
            e[2] = 1 - (1 - e[2]) * (1 - f.get("fail", 0.0))
            eff[pi] = e
    return eff


def lost_probes(rng, p):
    if p < 1e-3:
        return 1 if rng.random() < PROBES * p else 0
    return sum(1 for _ in range(PROBES) if rng.random() < p)


def side_values(c, site, prefix):
    return {prefix + "asw": c["tor"], prefix + "dsw": c["spine"], prefix + "ip": c["ip"],
            prefix + "node_id": c["node"], prefix + "node_sn": c["host"],
            prefix + "pod": c["pod"], prefix + "real_ip": c["nic"],
            prefix + "tenant_id": c["tenant"], prefix + "cluster_name": site["cluster_name"],
            prefix + "idc": site["idc"], prefix + "logic_site": site["logic_site"],
            prefix + "region_id": site["region_id"],
            prefix + "region_name": site["region_name"], prefix + "zone_id": site["zone_id"]}


def row_template(a, b, site):
    vals = {"agent_type": "overlay", "dscp": "0", "dst_port": "65300",
            "host_ip": a["host_ip"], "task_type": "RDMA_PING",
            "src_security_domain": site["security_domain"]}
    vals.update(side_values(a, site, "src_"))
    vals.update(side_values(b, site, "dst_"))
    for v in VARIABLE:
        vals[v] = "{%s}" % v
    return ",".join(vals.get(col, "") for col in HEADER)


class PairState:
    """What a pair's rows need: template, base RTT, effects and noise."""
    __slots__ = ("tmpl", "base", "eff", "noisy", "phase", "clock", "port")

    def __init__(self, rng, a, b, site, eff):
        self.tmpl = row_template(a, b, site)
        self.base = BASE_US[path_class(a, b)] + rng.gauss(0.0, 1.2)
        self.eff = eff or (0.0, 0.0, 0.0)
        self.noisy = None
        self.phase = rng.randint(0, 2_900_000_000)
        self.clock = a["clock_ns"]
        self.port = rng.randint(32768, 65535)


def one_row(rng, ps, t_ns, noise, blip):
    loss, add_us, fail = ps.eff
    tst = t_ns - rng.randint(20_000, 400_000)
    if fail and rng.random() < fail:
        return ps.tmpl.format(dial="fail", latency="", loss_rate="1", ping_time=t_ns,
                              src_port=ps.port, task_start_time=tst)
    p = 1 - (1 - noise["base_loss"]) * (1 - loss)
    k = lost_probes(rng, p)
    rtt = ps.base + rng.expovariate(1.25) + (add_us * rng.uniform(0.9, 1.1) if add_us else 0)
    if ps.noisy:
        rtt += abs(rng.gauss(0.0, ps.noisy["jitter_us"]))
        if rng.random() < ps.noisy["loss_row_p"]:
            k = max(k, 1)
    if blip:
        k = max(k, blip["loss_k"])
        rtt += blip["extra_us"]
    if rng.random() < noise["spike"]:
        rtt += rng.uniform(20.0, 300.0)
    lat = "" if k >= PROBES else "%.3f" % max(rtt, 1.0)
    return ps.tmpl.format(dial="success", latency=lat, loss_rate=LOSS_TEXT[k],
                          ping_time=t_ns, src_port=ps.port, task_start_time=tst)


def pair_rows(rng, ps, span, rounds, ctx, pi):
    """Rows of one pair over its active rounds, plus a dial failure when the
    destination container leaves mid-window (its peers notice once)."""
    first, end, dst_left = span
    blips = ctx["blips"].get(pi, {})
    out = []
    for r in range(first, end):
        if rng.random() < ctx["noise"]["missing"]:
            continue
        t = ctx["t0"] + r * ctx["interval"] + ps.phase + ps.clock + rng.randint(-50_000, 50_000)
        out.append((t, one_row(rng, ps, t, ctx["noise"], blips.get(r))))
    if dst_left and end < rounds and rng.random() < 0.3:
        t = ctx["t0"] + end * ctx["interval"] + ps.phase + ps.clock
        out.append((t, ps.tmpl.format(dial="fail", latency="", loss_rate="1", ping_time=t,
                                      src_port=ps.port, task_start_time=t - 100_000)))
    return out


def render_rows(rng, fab, pairs, faults, noise, churn, rounds, cp):
    conts, site = fab["conts"], fab["site"]
    effs = pair_effects(faults, cp, len(pairs))
    ctx = {"noise": noise, "t0": 1_795_000_000_000_000_000 + rng.randint(0, 10 ** 16),
           "interval": rng.choice((3, 5, 10)) * 1_000_000_000, "blips": {}}
    for b in noise["blips"]:
        ctx["blips"].setdefault(b["pair"], {})[b["round"]] = b
    noisy = {n["pair"]: n for n in noise["noisy_pairs"]}
    rows = []
    for pi, (a, b) in enumerate(pairs):
        ps = PairState(rng, conts[a], conts[b], site, effs[pi])
        ps.noisy = noisy.get(pi)
        fa, ea = churn.get(a, (0, rounds))
        fb, eb = churn.get(b, (0, rounds))
        span = (max(fa, fb), min(ea, eb), eb < ea)
        rows.extend(pair_rows(rng, ps, span, rounds, ctx, pi))
    rows.sort()
    return [r for _, r in rows]


# ------------------------------------------------------------------- window

ROUNDS = {"small": (8, 20), "medium": (6, 15), "large": (5, 10)}


def choose_scenario(rng, fab, pairs, cp, churn, only):
    """Draw a class (from MIX, or matching --only) the fabric can host."""
    churned = {fab["conts"][i]["node"] for i in churn}
    names = {n for n, _ in MIX}
    for _ in range(200):
        cls = draw_class(rng, only if only in names else None)
        faults = scenario(rng, cls, cp, pairs, fab, churned)
        if faults is None:
            continue
        if only is None or only in fault_tags(cls, faults):
            return cls, faults
    return None, None


def generate(seed, index, size, only=None):
    """Returns (csv_text, truth) for window `index` of run `seed`."""
    rng = random.Random("blind:%s:%s:%d" % (seed, size, index))
    for _ in range(5):
        fab = build_fabric(rng, size)
        pairs = skeleton_pairs(rng, fab)
        cp = comp_pairs(fab, pairs)
        rounds = rng.randint(*ROUNDS[size])
        churn = draw_churn(rng, fab, rounds)
        cls, faults = choose_scenario(rng, fab, pairs, cp, churn, only)
        if cls is not None:
            break
    else:
        raise RuntimeError("no %s window could host %r" % (size, only))
    noise = draw_noise(rng, len(pairs), rounds, healthy=not faults)
    rows = render_rows(rng, fab, pairs, faults, noise, churn, rounds, cp)
    truth = {"seed": str(seed), "index": index, "size": size, "class": cls,
             "tags": fault_tags(cls, faults), "rounds": rounds,
             "fabric": dict(fab["shape"], containers=len(fab["conts"]), pairs=len(pairs),
                            rows=len(rows), churned=len(churn)),
             "faults": [{k: v for k, v in f.items() if k != "hit_pairs"}
                        for f in faults],
             "noise": {"noisy_pairs": len(noise["noisy_pairs"]),
                       "blips": len(noise["blips"]),
                       "missing_share": round(noise["missing"], 4)}}
    conts = fab["conts"]
    for f, t in zip(faults, truth["faults"]):
        if "hit_pairs" in f:              # the flows an ECMP-partial fault hits
            t["hit_pairs"] = sorted({tuple(sorted((conts[pairs[pi][0]]["node"],
                                                   conts[pairs[pi][1]]["node"])))
                                     for pi in f["hit_pairs"]})
    text = "\ufeff" + ",".join(HEADER) + "\n" + "\n".join(rows) + ("\n" if rows else "")
    return text, truth


def write_window(seed, index, size, outdir, only=None):
    """Writes <outdir>/w<index>.csv and .truth.json; returns their paths and truth."""
    text, truth = generate(seed, index, size, only)
    base = os.path.join(outdir, "w%05d_%s" % (index, size))
    with open(base + ".csv", "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    with open(base + ".truth.json", "w", encoding="utf-8") as fh:
        json.dump(truth, fh, indent=1, sort_keys=True)
    return base + ".csv", base + ".truth.json", truth


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", required=True, help="run seed (printed by score.py)")
    ap.add_argument("--index", type=int, default=0, help="window index in the run")
    ap.add_argument("--size", choices=SIZES, default="small")
    ap.add_argument("--only", default=None, help="a class of MIX or a tag, e.g. spine_latency")
    ap.add_argument("--out", required=True, help="directory to write into")
    args = ap.parse_args(argv)
    if args.index < 0:
        ap.error("--index must be >= 0")
    os.makedirs(args.out, exist_ok=True)
    csv_path, truth_path, truth = write_window(args.seed, args.index, args.size,
                                               args.out, args.only)
    print(csv_path)
    print(truth_path)
    print(json.dumps(truth["faults"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
