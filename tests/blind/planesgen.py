#!/usr/bin/env python3
"""Blind two-plane (overlay + underlay) windows for `analyze`, and their scorer.

Written from docs/localizer.md ("Offline analysis", "Planes: overlay or
underlay"), the 45-column CSV schema and the shared sample only -- never from
the engine's source or tests.  One window is a CSV of a containerized GPU
cluster probed on both planes (`agent_type` overlay / underlay) with at most
one fault, plus a truth JSON naming it with its layer.

  planesgen.py gen   --seed S --index I --out DIR
  planesgen.py score --analyze BIN --windows N [--seed S] [--json F] [--keep DIR]
                     [--timeout SEC] [--worst N]

See PLANES.md.  Standard library only.
"""
import argparse
import collections
import concurrent.futures
import csv
import json
import os
import random
import secrets
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blindgen import HEADER, LOSS_TEXT, PROBES, flow_hash, hexid  # noqa: E402
import score as blindscore  # noqa: E402  (run_analyze: the rusage helper)

JOBS = 2

# The scenario mix, fixed before the first score was seen.
MIX = (
    ("healthy", 0.14),
    ("vport", 0.13),        # overlay: one container's virtual port (veth/VF)
    ("vswitch", 0.13),      # overlay: one host's virtual switch / VXLAN tunnel endpoint
    ("fwd_entry", 0.10),    # overlay: a deleted forwarding entry, rows TO one container fail
    ("nic", 0.13),          # underlay: one RDMA NIC, both planes' rows through it
    ("host", 0.10),         # underlay: every NIC of one host
    ("tor", 0.12),          # underlay: one ToR
    ("spine", 0.09),        # underlay: every flow over one spine block
    ("spine_ecmp", 0.06),   # underlay: 25-50 % of a spine block's flows (per-flow hash)
)
CLASSES = tuple(n for n, _ in MIX)
# class -> (layer, truth kind)
TRUTH_KIND = {"vport": ("overlay", "vport"), "vswitch": ("overlay", "vswitch"),
              "fwd_entry": ("overlay", "vport"), "nic": ("underlay", "nic"),
              "host": ("underlay", "host"), "tor": ("underlay", "tor"),
              "spine": ("underlay", "spine"), "spine_ecmp": ("underlay", "spine")}
# Minimum observed pairs (overlay, underlay) a faulty component must carry.
# (Overlay classes: the underlay coverage of the NIC / host is checked apart.)
MIN_PAIRS = {"vport": (2, 0), "vswitch": (3, 0), "fwd_entry": (3, 0), "nic": (2, 2),
             "host": (3, 3), "tor": (3, 3), "spine": (4, 4), "spine_ecmp": (8, 8)}
SIDE_COLS = ("node_id", "real_ip", "node_sn", "asw", "dsw", "pod", "tenant_id")


# ------------------------------------------------------------------- fabric

def build_fabric(rng):
    """Rail-optimized: NIC k of every host of a segment sits under the
    segment's ToR k; each ToR has one spine block (dsw) above it."""
    rails = rng.choice((4, 8, 8))
    segs = rng.choice((2, 2, 3))
    per_seg = rng.randint(4, 8)
    spines = [hexid(rng) for _ in range(rng.randint(2, 4))]
    tors = [[hexid(rng) for _ in range(rails)] for _ in range(segs)]
    tor_spine = [rng.randrange(len(spines)) for _ in range(segs * rails)]
    for s in range(len(spines)):                    # every block above some ToR
        if s not in tor_spine:
            tor_spine[rng.randrange(len(tor_spine))] = s
    pods = [hexid(rng) for _ in range(rng.choice((1, 1, 2)))]
    jobs = [hexid(rng) for _ in range(rng.choice((1, 2, 2, 3)))]
    site = {k: hexid(rng) for k in ("cluster_name", "idc", "logic_site", "region_id",
                                    "region_name", "zone_id", "security_domain")}
    hosts, rnics, conts = [], [], []
    for s in range(segs):
        pod = pods[s * len(pods) // segs]
        for h in range(per_seg):
            host = {"sn": hexid(rng), "ip": hexid(rng), "seg": s, "idx": h,
                    "clock_ns": rng.randint(-2_000_000, 2_000_000),
                    "job": rng.choice(jobs), "rnics": [], "conts": []}
            hosts.append(host)
            # containers: one per rail, or fewer (a partial job), or none (idle host)
            u = rng.random()
            rails_used = (list(range(rails)) if u < 0.8 else
                          sorted(rng.sample(range(rails), rails // 2)) if u < 0.95 else [])
            for k in range(rails):
                nic = {"plane": "underlay", "node": "%s-rnic%d" % (host["sn"], k),
                       "nic": hexid(rng), "host": host["sn"], "tor": tors[s][k],
                       "spine": spines[tor_spine[s * rails + k]], "pod": pod,
                       "tenant": "", "host_ip": host["ip"], "clock_ns": host["clock_ns"],
                       "seg": s, "hidx": h, "rail": k}
                nic["ip"] = nic["nic"]
                rnics.append(nic)
                host["rnics"].append(nic)
                if k in rails_used:
                    c = dict(nic, plane="overlay", node=hexid(rng), ip=hexid(rng),
                             tenant=host["job"])
                    conts.append(c)
                    host["conts"].append(c)
    return {"rails": rails, "segments": segs, "per_seg": per_seg, "spines": spines,
            "hosts": hosts, "rnics": rnics, "conts": conts, "site": site}


def skeletons(rng, fab):
    """Directed (src, dst) endpoint pairs per plane.

    Overlay: per job and rail, the containers in host order probe their ring successor
    and their binary-tree parent, and with 30 % a random container of the job on the rail.
    Underlay: per rail, each RNIC probes the next host of its segment (same
    ToR), the same host index in the next segment (cross-ToR), and with 50 %
    a random RNIC of the rail.  4 % of candidates are dropped (coverage)."""
    def by_rail(eps):
        out = collections.defaultdict(list)
        for e in eps:                       # a job probes only its own containers
            out[(e["tenant"], e["rail"])].append(e)
        return out

    overlay = set()
    for line in by_rail(fab["conts"]).values():
        n = len(line)
        for i, c in enumerate(line):
            cands = [line[(i + 1) % n]]
            if i > 0:
                cands.append(line[(i - 1) // 2])
            if rng.random() < 0.3:
                cands.append(rng.choice(line))
            for d in cands:
                if d is not c and rng.random() > 0.04:
                    overlay.add((c["node"], d["node"]))
    underlay = set()
    segs, per = fab["segments"], fab["per_seg"]
    for line in by_rail(fab["rnics"]).values():
        slot = {(r["seg"], r["hidx"]): r for r in line}
        for r in line:
            s, h = r["seg"], r["hidx"]
            cands = [slot[(s, (h + 1) % per)], slot[((s + 1) % segs, h)]]
            if rng.random() < 0.5:
                cands.append(rng.choice(line))
            for d in cands:
                if d is not r and rng.random() > 0.04:
                    underlay.add((r["node"], d["node"]))
    return sorted(overlay), sorted(underlay)


# ------------------------------------------------------------ path model

def path_comps(a, b):
    """Physical components a probe between endpoints a and b crosses: both
    NICs and hosts; the ToR(s) when the hosts differ; both spine blocks when
    the ToRs differ.  Overlay probes also cross both containers' virtual
    ports and both hosts' virtual switches (named here vport:<container>,
    vswitch:<host sn>)."""
    comps = {("nic", a["nic"]), ("nic", b["nic"]), ("host", a["host"]), ("host", b["host"])}
    if a["plane"] == "overlay":
        comps |= {("vport", a["node"]), ("vport", b["node"]),
                  ("vswitch", a["host"]), ("vswitch", b["host"])}
    if a["host"] != b["host"]:
        comps |= {("tor", a["tor"]), ("tor", b["tor"])}
        if a["tor"] != b["tor"]:
            comps |= {("spine", a["spine"]), ("spine", b["spine"])}
    return comps


# --------------------------------------------------------------- scenarios

def comp_pairs(fab, overlay, underlay):
    """(kind, id) -> [overlay pairs, underlay pairs] crossing it (directed)."""
    ep = endpoints(fab)
    out = collections.defaultdict(lambda: ([], []))
    for plane, pairs in ((0, overlay), (1, underlay)):
        for p in pairs:
            for comp in path_comps(ep[p[0]], ep[p[1]]):
                out[comp][plane].append(p)
    return out


def endpoints(fab):
    return {e["node"]: e for e in fab["conts"] + fab["rnics"]}


def enough(cp, comp, cls):
    lo_o, lo_u = MIN_PAIRS[cls]
    o, u = cp.get(comp, ((), ()))
    return len(o) >= lo_o and len(u) >= lo_u


def draw_effect(rng):
    if rng.random() < 0.7:
        return "loss", {"loss": round(rng.uniform(0.05, 0.30), 4)}
    return "unreachable", {"fail": 1.0 if rng.random() < 0.5 else round(rng.uniform(0.3, 0.8), 4)}


def scenario(rng, cls, fab, cp, overlay, underlay):
    """The fault of a window class, or None when the fabric cannot host it."""
    if cls == "healthy":
        return None
    layer, kind = TRUTH_KIND[cls]
    if cls in ("vport", "fwd_entry"):
        # the container's own NIC must be probed on the underlay (layer decidable)
        cands = [c for c in fab["conts"] if enough(cp, ("vport", c["node"]), cls)
                 and len(cp.get(("nic", c["nic"]), ((), ()))[1]) >= 2]
        if cls == "fwd_entry":
            cands = [c for c in cands
                     if sum(1 for p in cp[("vport", c["node"])][0] if p[1] == c["node"]) >= 2
                     and any(p[0] == c["node"] for p in cp[("vport", c["node"])][0])]
        ids = [(c["node"], c) for c in cands]
    elif cls == "vswitch":
        ids = [(h["sn"], h) for h in fab["hosts"] if enough(cp, ("vswitch", h["sn"]), cls)
               and len(cp.get(("host", h["sn"]), ((), ()))[1]) >= 2]
    else:
        ids = sorted({cid for (k, cid) in cp if k == kind and enough(cp, (k, cid), cls)})
        ids = [(cid, None) for cid in ids]
    if not ids:
        return None
    cid, obj = rng.choice(ids)
    if cls == "fwd_entry":
        symptom, eff = "unreachable", {"fail": 1.0, "direction": "to"}
    else:
        symptom, eff = draw_effect(rng)
    f = {"class": cls, "layer": layer, "kind": kind, "id": cid, "symptom": symptom}
    f.update(eff)
    if cls in ("vport", "fwd_entry"):
        f["host"] = obj["host"]
        f["nic"] = obj["nic"]
    if cls == "spine_ecmp":
        f["fraction"] = round(rng.uniform(0.25, 0.50), 3)
        f["salt"] = hexid(rng)
        hit = sorted({(pl,) + tuple(sorted(p)) for pl, pairs in (("overlay", cp[(kind, cid)][0]),
                                                                  ("underlay", cp[(kind, cid)][1]))
                      for p in pairs if flow_hash(f["salt"] + pl, p[0], p[1]) < f["fraction"]})
        if len(hit) < 3:
            return None
        f["hit_flows"] = [list(h) for h in hit]
    return f


def row_effect(f, plane, a, b):
    """(per-probe loss, dial-failure share) the fault adds to one directed row."""
    if f is None:
        return 0.0, 0.0
    cls = f["class"]
    if cls == "fwd_entry":
        hit = plane == "overlay" and b["node"] == f["id"]
    elif cls in ("vport", "vswitch"):
        hit = plane == "overlay" and (f["kind"], f["id"]) in path_comps(a, b)
    else:
        hit = (f["kind"], f["id"]) in path_comps(a, b)
        if hit and cls == "spine_ecmp":
            hit = flow_hash(f["salt"] + plane, a["node"], b["node"]) < f["fraction"]
    if not hit:
        return 0.0, 0.0
    return f.get("loss", 0.0), f.get("fail", 0.0)


# --------------------------------------------------------------------- rows

def side_values(e, site, prefix):
    v = {"asw": e["tor"], "dsw": e["spine"], "ip": e["ip"], "node_id": e["node"],
         "node_sn": e["host"], "pod": e["pod"], "real_ip": e["nic"], "tenant_id": e["tenant"],
         "cluster_name": site["cluster_name"], "idc": site["idc"],
         "logic_site": site["logic_site"], "region_id": site["region_id"],
         "region_name": site["region_name"], "zone_id": site["zone_id"]}
    return {prefix + k: x for k, x in v.items()}


def template(plane, a, b, site, task):
    vals = {"agent_type": plane, "dscp": "0", "dst_port": "65300", "host_ip": a["host_ip"],
            "task_type": task, "src_security_domain": site["security_domain"]}
    vals.update(side_values(a, site, "src_"))
    vals.update(side_values(b, site, "dst_"))
    for v in ("dial", "latency", "loss_rate", "ping_time", "src_port", "task_start_time"):
        vals[v] = "{%s}" % v
    return ",".join(vals.get(col, "") for col in HEADER)


def base_rtt(plane, a, b):
    us = 8.5 if a["tor"] == b["tor"] else 11.0 if a["spine"] == b["spine"] else 13.0
    return us + (5.0 if plane == "overlay" else 0.0)     # two vswitches + VXLAN


def lost(rng, p):
    if p < 1e-3:
        return 1 if rng.random() < PROBES * p else 0
    return sum(1 for _ in range(PROBES) if rng.random() < p)


def draw_noise(rng, n_pairs, rounds, healthy):
    noise = {"missing": rng.uniform(0.005, 0.03), "spike": rng.uniform(0.002, 0.01),
             "base_loss": 1e-4, "noisy": {}, "blips": {}}
    if healthy or rng.random() < 0.5:
        for _ in range(rng.randint(1, 2)):
            noise["noisy"][rng.randrange(n_pairs)] = (rng.uniform(5, 10), rng.uniform(0.03, 0.10))
    if healthy or rng.random() < 0.5:
        r = rng.randrange(rounds)
        for _ in range(rng.randint(2, 4)):
            noise["blips"][rng.randrange(n_pairs)] = (r, rng.randint(1, 2))
    return noise


def one_row(rng, tmpl, t, port, base, loss, fail, noise, noisy, blip):
    tst = t - rng.randint(20_000, 400_000)
    if fail and rng.random() < fail:
        return tmpl.format(dial="fail", latency="", loss_rate="1", ping_time=t,
                           src_port=port, task_start_time=tst)
    k = lost(rng, 1 - (1 - noise["base_loss"]) * (1 - loss))
    rtt = base + rng.expovariate(1.25)
    if noisy:
        rtt += abs(rng.gauss(0.0, noisy[0]))
        if rng.random() < noisy[1]:
            k = max(k, 1)
    if blip:
        k = max(k, blip)
    if rng.random() < noise["spike"]:
        rtt += rng.uniform(20.0, 300.0)
    return tmpl.format(dial="success", latency="" if k >= PROBES else "%.3f" % rtt,
                       loss_rate=LOSS_TEXT[k], ping_time=t, src_port=port, task_start_time=tst)


def render(rng, fab, overlay, underlay, fault, rounds):
    ep, site = endpoints(fab), fab["site"]
    interval = rng.choice((5, 10)) * 1_000_000_000
    t0 = 1_795_000_000_000_000_000 + rng.randint(0, 10 ** 16)
    allpairs = [("overlay", p) for p in overlay] + [("underlay", p) for p in underlay]
    noise = draw_noise(rng, len(allpairs), rounds, healthy=fault is None)
    rows, counts = [], collections.Counter()
    for pi, (plane, (s, d)) in enumerate(allpairs):
        a, b = ep[s], ep[d]
        loss, fail = row_effect(fault, plane, a, b)
        base = base_rtt(plane, a, b) + rng.gauss(0.0, 1.0)
        phase = rng.randint(0, int(0.9 * interval))
        tcp = rng.random() < 0.2                       # this pair also runs TCP pings
        tasks = [("RDMA_PING", 0.0, 0)] + ([("TCP_PING", 14.0, rng.randint(1, 3) * 1_000_000)]
                                           if tcp else [])
        blip = noise["blips"].get(pi)
        for task, extra, dt in tasks:
            tmpl = template(plane, a, b, site, task)
            port = rng.randint(32768, 65535)
            for r in range(rounds):
                if rng.random() < noise["missing"]:
                    continue
                t = t0 + r * interval + phase + dt + a["clock_ns"] + rng.randint(-50_000, 50_000)
                rows.append((t, one_row(rng, tmpl, t, port, base + extra, loss, fail, noise,
                                        noise["noisy"].get(pi),
                                        blip[1] if blip and blip[0] == r else 0)))
                counts[(plane, task)] += 1
        if rng.random() < 0.05:                        # a traceroute or two (skipped by docs)
            tmpl = template(plane, a, b, site, "TRACEROUTE")
            for _ in range(rng.randint(1, 2)):
                t = t0 + rng.randint(0, (rounds - 1) * interval)
                port = rng.randint(32768, 65535)
                if fail and rng.random() < fail:     # the fault stops traceroutes too
                    rows.append((t, tmpl.format(dial="fail", latency="", loss_rate="1",
                                                ping_time=t, src_port=port,
                                                task_start_time=t - 50_000)))
                    counts[(plane, "TRACEROUTE")] += 1
                    continue
                # a hop's reply time; routers rate-limit ICMP, so "loss" on healthy paths
                k = max(rng.choice((0, 0, 0, 1, 2, 3)), lost(rng, loss))
                rows.append((t, tmpl.format(dial="success",
                                            latency="" if k >= PROBES else
                                            "%.3f" % rng.uniform(3.0, 600.0),
                                            loss_rate=LOSS_TEXT[k], ping_time=t, src_port=port,
                                            task_start_time=t - 50_000)))
                counts[(plane, "TRACEROUTE")] += 1
    rows.sort()
    return [r for _, r in rows], counts, noise


# ------------------------------------------------------------------- window

def generate(seed, index, only=None):
    """Returns (csv_text, truth) for window `index` of run `seed` (of class
    `only` when given: for tests and replays of one class)."""
    rng = random.Random("planes:%s:%d" % (seed, index))
    cls = rng.choices(CLASSES, [w for _, w in MIX])[0]
    cls = only or cls
    for _ in range(10):
        fab = build_fabric(rng)
        overlay, underlay = skeletons(rng, fab)
        cp = comp_pairs(fab, overlay, underlay)
        fault = scenario(rng, cls, fab, cp, overlay, underlay)
        if cls == "healthy" or fault is not None:
            break
    else:
        raise RuntimeError("no fabric could host class %r" % cls)
    rounds = rng.randint(6, 12)
    rows, counts, noise = render(rng, fab, overlay, underlay, fault, rounds)
    truth = {"seed": str(seed), "index": index, "class": cls,
             "layer": fault["layer"] if fault else None,
             "faults": [{k: v for k, v in fault.items() if k != "salt"}] if fault else [],
             "rounds": rounds,
             "fabric": {"rails": fab["rails"], "segments": fab["segments"],
                        "hosts": len(fab["hosts"]), "containers": len(fab["conts"]),
                        "spines": len(fab["spines"]), "overlay_pairs": len(overlay),
                        "underlay_pairs": len(underlay), "rows": len(rows),
                        "rows_by_task": {"%s/%s" % k: v for k, v in sorted(counts.items())}},
             "noise": {"noisy_pairs": len(noise["noisy"]), "blips": len(noise["blips"]),
                       "missing_share": round(noise["missing"], 4)}}
    text = "\ufeff" + ",".join(HEADER) + "\n" + "\n".join(rows) + ("\n" if rows else "")
    return text, truth


def write_window(seed, index, outdir, only=None):
    text, truth = generate(seed, index, only)
    base = os.path.join(outdir, "p%05d" % index)
    with open(base + ".csv", "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    with open(base + ".truth.json", "w", encoding="utf-8") as fh:
        json.dump(truth, fh, indent=1, sort_keys=True)
    return base + ".csv", base + ".truth.json", truth


# ----------------------------------------------------------------- scoring
#
# Names.  The analyzer's vocabulary is node, nic, host, tor, spine (+ vport,
# vswitch on the overlay).  `vport X` is container X's own stack and `node X`
# (a container id) names the same thing; `vswitch H` and `host H` share the
# host's serial.  An underlay endpoint id (the RNIC) names its NIC.  So a
# report is first brought to a canonical name:  vport/node(container) ->
# ("ctr", id), vswitch/host -> ("host", sn), node(rnic) -> ("nic", real_ip).
#
# Equivalence.  An underlay (physical) fault shows on both planes, so a
# component is equivalent to it when it crosses exactly the same observed
# pairs on both planes (a host with one observed NIC, a ToR with one observed
# host...).  An overlay fault shows on the overlay alone, so there the
# overlay pairs decide (a container and the only NIC it uses, a host and its
# only container); whether the analyzer also got the layer is measured apart.
# For a partial (ECMP) spine fault, a spine crossed by every observed hit flow
# is accepted too (the docs' `equivalent` for partial spine faults).

def read_observed(csv_path):
    """Per plane: unordered pairs with a probe row (traceroutes skipped) ->
    (side a, side b); and the RNIC id -> real_ip aliases of the underlay."""
    obs = {"overlay": {}, "underlay": {}}
    rnic = {}
    with open(csv_path, encoding="utf-8-sig", newline="") as fh:
        rd = csv.reader(fh)
        col = {n: i for i, n in enumerate(next(rd))}
        sides = [{c: col[p + c] for c in SIDE_COLS} for p in ("src_", "dst_")]
        for row in rd:
            if row[col["task_type"]].upper().startswith("TRACE"):
                continue
            plane = row[col["agent_type"]].lower()
            sa, sb = ({c: row[i] for c, i in s.items()} for s in sides)
            if plane == "underlay":
                for s in (sa, sb):
                    rnic[s["node_id"]] = s["real_ip"]
            key = tuple(sorted((sa["node_id"], sb["node_id"])))
            obs[plane].setdefault(key, (sa, sb))
    return obs, rnic


def observed_sets(obs):
    """canonical component -> (frozenset overlay pairs, frozenset underlay pairs)."""
    sets = collections.defaultdict(lambda: (set(), set()))
    for pl, plane in enumerate(("overlay", "underlay")):
        for key, (sa, sb) in obs[plane].items():
            comps = {("nic", sa["real_ip"]), ("nic", sb["real_ip"]),
                     ("host", sa["node_sn"]), ("host", sb["node_sn"])}
            if plane == "overlay":
                comps |= {("ctr", sa["node_id"]), ("ctr", sb["node_id"])}
            if sa["node_sn"] != sb["node_sn"]:
                comps |= {("tor", sa["asw"]), ("tor", sb["asw"])}
                if sa["asw"] != sb["asw"]:
                    comps |= {("spine", sa["dsw"]), ("spine", sb["dsw"])}
            for c in comps:
                sets[c][pl].add(key)
    return {c: (frozenset(o), frozenset(u)) for c, (o, u) in sets.items()}


def canon(kind, cid, rnic):
    if kind in ("vport",):
        return ("ctr", cid)
    if kind == "node":
        return ("nic", rnic[cid]) if cid in rnic else ("ctr", cid)
    if kind == "vswitch":
        return ("host", cid)
    return (kind, cid)


def accepted_names(fault, sets, obs):
    """Canonical names a report may carry to find this true fault."""
    key = canon(fault["kind"], fault["id"], {})
    names = {key}
    mine = sets.get(key)
    if mine is None:
        return names, False
    if fault["layer"] == "overlay":
        if mine[0]:
            names |= {c for c, s in sets.items() if s[0] == mine[0]}
    elif mine[0] or mine[1]:
        names |= {c for c, s in sets.items() if s == mine}
    if fault.get("hit_flows"):
        hits = [set(), set()]
        for pl, a, b in fault["hit_flows"]:
            pi = 0 if pl == "overlay" else 1
            if (a, b) in obs[pl]:
                hits[pi].add((a, b))
        if hits[0] or hits[1]:
            names |= {c for c, s in sets.items() if c[0] == "spine"
                      and hits[0] <= s[0] and hits[1] <= s[1]}
    return names, bool(mine[0] or mine[1])


def score_window(truth, csv_path, report):
    obs, rnic = read_observed(csv_path)
    sets = observed_sets(obs)
    reports = (report or {}).get("faults") or []
    fault = truth["faults"][0] if truth["faults"] else None
    names, observed = accepted_names(fault, sets, obs) if fault else (set(), False)
    correct, match = 0, None
    for rep in reports:
        rn = {canon(rep.get("kind"), rep.get("id"), rnic)}
        rn |= {canon(e.get("kind"), e.get("id"), rnic) for e in rep.get("equivalent") or ()}
        if rn & names:
            correct += 1
            if match is None:
                match = rep
    return {"reports": len(reports), "correct": correct, "false": len(reports) - correct,
            "found": None if fault is None else match is not None,
            "layer": None if match is None else match.get("layer"),
            "basis": None if match is None else match.get("basis"),
            "layer_ok": None if fault is None else
            (match is not None and match.get("layer") == fault["layer"]),
            "symptom": None if match is None else match.get("symptom"),
            "first": short(reports[0]) if reports else None,
            "truth_observed": observed if fault else None,
            "plane_pairs": (report or {}).get("plane_pairs")}


def short(rep):
    return "%s %s.. %s %.3g layer=%s basis=%s" % (
        rep.get("kind"), str(rep.get("id"))[:12], rep.get("symptom"), rep.get("score") or 0.0,
        rep.get("layer"), rep.get("basis"))


def ratio(n, d):
    return round(n / d, 4) if d else None


def summarize(recs):
    faulty = [r for r in recs if r["truth"]["faults"]]
    healthy = [r for r in recs if not r["truth"]["faults"]]
    found = sum(1 for r in faulty if r["score"]["found"])
    lay = sum(1 for r in faulty if r["score"]["layer_ok"])
    reports = sum(r["score"]["reports"] for r in recs)
    layers = collections.Counter(r["score"]["layer"] or "none" for r in faulty
                                 if r["score"]["found"])
    return {"windows": len(recs), "faulty": len(faulty), "healthy": len(healthy),
            "found": found, "recall": ratio(found, len(faulty)),
            "layer_ok": lay, "layer_accuracy": ratio(lay, len(faulty)),
            "layer_accuracy_of_found": ratio(lay, found),
            "reports": reports,
            "precision": ratio(sum(r["score"]["correct"] for r in recs), reports),
            "healthy_flagged": sum(1 for r in healthy if r["score"]["reports"]),
            "healthy_flagged_share": ratio(sum(1 for r in healthy if r["score"]["reports"]),
                                           len(healthy)),
            "layers_of_found": dict(layers),
            "errors": sum(1 for r in recs if r["error"]),
            "rows_mean": round(sum(r["truth"]["fabric"]["rows"] for r in recs) / len(recs))
            if recs else None}


def figures(recs, seed):
    classes = [c for c in CLASSES if any(r["truth"]["class"] == c for r in recs)]
    by_class = collections.OrderedDict(
        (c, summarize([r for r in recs if r["truth"]["class"] == c])) for c in classes)
    by_layer = collections.OrderedDict(
        (l, summarize([r for r in recs if r["truth"]["layer"] == l]))
        for l in ("overlay", "underlay") if any(r["truth"]["layer"] == l for r in recs))
    return {"seed": seed, "windows": len(recs), "overall": summarize(recs),
            "by_layer": by_layer, "by_class": by_class}


def fmt(x):
    return "-" if x is None else "%.1f%%" % (100 * x)


def print_table(fig, recs, worst, out=sys.stdout):
    w = out.write
    w("seed %s  windows %d\n\n" % (fig["seed"], fig["windows"]))
    w("%-16s %4s %5s %6s %7s %7s %8s %7s %9s %4s %5s  %s\n" % (
        "group", "win", "fault", "rows", "recall", "layer", "layer|f", "prec", "hlthflag",
        "err", "found", "layer given (found)"))
    groups = [("all", fig["overall"])]
    groups += [("layer:" + k, v) for k, v in fig["by_layer"].items()]
    groups += [("class:" + k, v) for k, v in fig["by_class"].items()]
    for name, s in groups:
        lay = " ".join("%s %d" % kv for kv in sorted(s["layers_of_found"].items())) or "-"
        hf = ("%d/%d" % (s["healthy_flagged"], s["healthy"])) if s["healthy"] else "-"
        w("%-16s %4d %5d %6s %7s %7s %8s %7s %9s %4d %5d  %s\n" % (
            name, s["windows"], s["faulty"], s["rows_mean"], fmt(s["recall"]),
            fmt(s["layer_accuracy"]), fmt(s["layer_accuracy_of_found"]), fmt(s["precision"]),
            hf, s["errors"], s["found"], lay))
    w("\nrecall = faulty windows whose fault a report names (or lists in `equivalent`);\n"
      "layer = found with the truth's layer / faulty windows; layer|f = the same / found;\n"
      "prec = reports naming the true fault / all reports; hlthflag = healthy windows with "
      "any report.\n")
    bad = [r for r in recs if badness(r)]
    bad.sort(key=lambda r: (-badness(r), r["index"]))
    if bad[:worst]:
        w("\nworst windows (replay: planesgen.py gen --seed %s --index I --out DIR)\n"
          % fig["seed"])
    for r in bad[:worst]:
        t, sc = r["truth"], r["score"]
        f = t["faults"][0] if t["faults"] else None
        w("  index %d %-10s %s false %d%s\n    truth %s\n    first %s\n" % (
            r["index"], t["class"],
            "healthy" if f is None else ("found" if sc["found"] else "MISSED") +
            ("" if not sc["found"] else " layer=%s" % sc["layer"]),
            sc["false"], "  ERROR " + r["error"] if r["error"] else "",
            "(healthy)" if f is None else "%s %s %s.. %s" % (f["layer"], f["kind"],
                                                            f["id"][:12], f["symptom"]),
            sc["first"]))


def badness(r):
    sc = r["score"]
    return ((10 if r["error"] else 0) + (3 if sc["found"] is False else 0)
            + (1 if sc["found"] and not sc["layer_ok"] else 0) + sc["false"])


def run_score(args):
    seed = args.seed if args.seed is not None else str(secrets.randbelow(2 ** 40))
    print("seed %s (replay with --seed %s)" % (seed, seed), file=sys.stderr)
    workdir = args.keep or tempfile.mkdtemp(prefix="planes-")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    recs, pending = [], collections.deque()

    def finish(job):
        fut, csv_path, truth = job
        report, error, wall, rss = fut.result()
        recs.append({"index": truth["index"], "truth": truth, "error": error, "wall": wall,
                     "rss_kib": rss, "score": score_window(truth, csv_path, report)})
        if not args.keep:
            for sfx in (".csv", ".truth.json", ".out.json", ".err.txt", ".rusage"):
                if os.path.exists(csv_path[:-4] + sfx):
                    os.remove(csv_path[:-4] + sfx)

    t0 = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as ex:
            for i in range(args.windows):
                csv_path, _, truth = write_window(seed, i, workdir)
                pending.append((ex.submit(blindscore.run_analyze, args.analyze, csv_path,
                                          args.timeout), csv_path, truth))
                while len(pending) > JOBS:
                    finish(pending.popleft())
                if (i + 1) % 50 == 0:
                    print("  %d/%d windows, %.0f s" % (i + 1, args.windows,
                                                      time.monotonic() - t0), file=sys.stderr)
            while pending:
                finish(pending.popleft())
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    recs.sort(key=lambda r: r["index"])
    fig = figures(recs, seed)
    print_table(fig, recs, args.worst)
    if args.json:
        fig["per_window"] = [{"index": r["index"], "class": r["truth"]["class"],
                              "truth": r["truth"]["faults"], "error": r["error"],
                              "wall_s": round(r["wall"], 3), "rss_kib": r["rss_kib"],
                              **r["score"]} for r in recs]
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(fig, fh, indent=1)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen", help="write one window (CSV + truth JSON)")
    g.add_argument("--seed", required=True)
    g.add_argument("--index", type=int, default=0)
    g.add_argument("--out", required=True)
    g.add_argument("--only", choices=CLASSES, default=None,
                   help="force this class (the rest of the window as drawn)")
    s = sub.add_parser("score", help="generate N windows, run analyze, print a table")
    s.add_argument("--analyze", required=True, help="path of the analyzer binary")
    s.add_argument("--windows", type=int, default=120)
    s.add_argument("--seed", default=None, help="run seed (default: drawn fresh, printed)")
    s.add_argument("--json", default=None, help="write the figures and per-window records here")
    s.add_argument("--keep", default=None, help="keep every window's CSV, truth and output here")
    s.add_argument("--timeout", type=float, default=300.0, help="seconds per analyze run")
    s.add_argument("--worst", type=int, default=10, help="worst windows to list")
    args = ap.parse_args(argv)
    if args.cmd == "gen":
        if args.index < 0:
            ap.error("--index must be >= 0")
        os.makedirs(args.out, exist_ok=True)
        csv_path, truth_path, truth = write_window(args.seed, args.index, args.out, args.only)
        print(csv_path)
        print(truth_path)
        print(json.dumps({"class": truth["class"], "faults": truth["faults"]}))
        return 0
    if not (1 <= args.windows <= 100000):
        ap.error("--windows must be between 1 and 100000")
    if not (os.path.isfile(args.analyze) and os.access(args.analyze, os.X_OK)):
        ap.error("--analyze %r is not an executable file" % args.analyze)
    if not (0 < args.timeout <= 86400) or args.worst < 0:
        ap.error("--timeout and --worst must be positive")
    if args.keep and os.path.exists(args.keep) and os.listdir(args.keep):
        ap.error("--keep %r exists and is not empty" % args.keep)
    return run_score(args)


if __name__ == "__main__":
    sys.exit(main())
