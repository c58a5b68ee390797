#!/usr/bin/env python3
"""Blind jobs generator and scorer for `skeletonhunter-localizer jobs`.

  python3 tests/blind/jobs.py generate --jobs K [--seed S] --out FILE.json [--max-ranks 4096]
  python3 tests/blind/jobs.py score --analyze BIN --jobs K [--seed S] [--max-ranks 4096]
      [--keep DIR] [--timeout SEC] [--worst N] [--json OUT.json]

`generate` writes the engine's input (FILE.json) and the truth (FILE.truth.json).
`score` generates, runs `BIN jobs --input FILE.json`, reads its JSON on stdout
and scores each job's TP/DP/PP partitions by adjusted Rand index.  Written
blind: the engine is a black box, only its `jobs` subcommand is used.  Job i
of a seed is the same whatever --jobs is.  Standard library only.
"""
import argparse
import collections
import json
import math
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KINDS = ("tp", "dp", "pp")
CLASSES = ("3d", "tp_dp", "tp_pp", "dp_pp", "pure_dp", "pure_tp", "pure_pp")
BUCKETS = (64, 512, 4096)
# At most this many alternatives of an answer are scored (an answer listing
# every layout would otherwise always contain the truth).
MAX_ALTERNATIVES = 3


def usage_error(msg):
    print("jobs.py: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def pick(rng, table):
    """Weighted choice from [(value, weight), ...]."""
    tot = sum(w for _, w in table)
    x = rng.random() * tot
    for v, w in table:
        x -= w
        if x < 0:
            return v
    return table[-1][0]


# ------------------------------------------------------------------ shapes

PATTERN = [("3d", 32), ("tp_dp", 20), ("pure_dp", 15), ("dp_pp", 12),
           ("tp_pp", 11), ("pure_tp", 5), ("pure_pp", 5)]
TP_DEG = [(2, 12), (4, 22), (8, 56), (16, 10)]
PP_DEG = [(2, 15), (4, 30), (8, 25), (16, 12), (32, 4), (3, 4), (6, 4), (12, 3), (5, 3)]
GPH = [(8, 82), (4, 10), (16, 4), (2, 4)]


def sample_grid(rng, pattern, max_ranks):
    """(tp, dp, pp) for the pattern with 8 <= N <= max_ranks, or None."""
    lo, hi = math.log2(8), math.log2(max_ranks)
    if pattern == "pure_tp":
        tp = pick(rng, [(8, 50), (16, 35), (32, 15)])
        return (tp, 1, 1) if tp <= max_ranks else None
    if pattern == "pure_pp":
        pp = pick(rng, [(8, 35), (16, 30), (32, 15), (12, 10), (24, 10)])
        return (1, 1, pp) if pp <= max_ranks else None
    tp = pick(rng, TP_DEG) if pattern in ("3d", "tp_dp", "tp_pp") else 1
    pp = pick(rng, PP_DEG) if pattern in ("3d", "dp_pp", "tp_pp") else 1
    if pattern == "tp_pp":
        dp = 1
    else:
        target = 2 ** rng.uniform(lo, hi) / (tp * pp)
        if rng.random() < 0.75:
            dp = 2 ** max(1, round(math.log2(max(target, 1))))
        else:                               # non-power-of-two degree: 3, 5, 6, 12, 20, 96...
            m = pick(rng, [(3, 50), (5, 25), (7, 10), (9, 5), (15, 10)])
            dp = m * 2 ** max(0, round(math.log2(max(target / m, 1))))
        while dp > 2 and tp * dp * pp > max_ranks:
            dp -= 1 if dp & (dp - 1) else dp // 2
    n = tp * dp * pp
    if not 8 <= n <= max_ranks:
        return None
    return tp, dp, pp


def sample_spec(seed, index, max_ranks):
    rng = random.Random("%s:%d" % (seed, index))
    pattern, grid = None, None
    for _ in range(200):
        pattern = pick(rng, PATTERN)
        grid = sample_grid(rng, pattern, max_ranks)
        if grid:
            break
    if not grid:
        pattern, grid = "pure_dp", (1, 8, 1)
    spec = {
        "index": index, "class": pattern, "grid": grid,
        "order": pick(rng, [("tp-dp-pp", 70), ("tp-pp-dp", 30)]),
        "gph": pick(rng, GPH),
        "intra": pick(rng, [("nvlink", 80), ("container", 20)]),
        "dp_algo": pick(rng, [("ring", 45), ("ring+tree", 35), ("tree", 20)]),
        "tp_algo": pick(rng, [("ring", 70), ("mesh", 30)]),
        "channels": pick(rng, [("rails", 60), (2, 25), (1, 15)]),
        "exit": pick(rng, [("rail", 70), ("classic", 30)]),
        "node_shuffle": rng.random() < 0.10,
        "pp_wrap": rng.random() < 0.50,
        "intervals": pick(rng, [(12, 25), (60, 35), (288, 25), (0, 15)]),
        "world_ring": rng.random() < 0.25,
        "mp_group": rng.random() < 0.20,
        "ckpt_star": rng.random() < 0.15,
        "missing": pick(rng, [("none", 30), ("low", 50), ("high", 20)]),
        "host_out": rng.random() < 0.08,
    }
    return spec, rng


# ----------------------------------------------------------------- layout

def coords(order, grid, r):
    tp, dp, pp = grid
    t = r % tp
    if order == "tp-dp-pp":
        return t, (r // tp) % dp, r // (tp * dp)
    return t, r // (tp * pp), (r // tp) % pp          # tp-pp-dp


def true_groups(order, grid, n):
    by = {k: collections.defaultdict(list) for k in KINDS}
    for r in range(n):
        t, d, p = coords(order, grid, r)
        by["tp"][(d, p)].append(r)
        by["dp"][(t, p)].append(r)
        by["pp"][(t, d)].append(r)
    return {k: sorted(by[k].values()) for k in KINDS}


def blocks_of(members, gph, intra_visible):
    """Members split into per-host blocks (NVLink/SHM inside a block is invisible)."""
    if intra_visible:
        return [[m] for m in members]
    out = []
    for m in members:
        if out and out[-1][-1] // gph == m // gph:
            out[-1].append(m)
        else:
            out.append([m])
    return out


def collective(members, algo, spec, rng, nch=None):
    """Network-visible connection pairs of one NCCL communicator."""
    intra_visible = spec["intra"] == "container"
    blocks = blocks_of(members, spec["gph"], intra_visible)
    k = len(blocks)
    pairs = set()
    if k < 2:
        return pairs
    if algo == "mesh":
        flat = [m for b in blocks for m in b]
        for i in range(len(flat)):
            for j in range(i + 1, len(flat)):
                if intra_visible or flat[i] // spec["gph"] != flat[j] // spec["gph"]:
                    pairs.add((flat[i], flat[j]))
        return pairs
    bmax = max(len(b) for b in blocks)
    if nch is None:
        nch = bmax if spec["channels"] == "rails" else min(spec["channels"], bmax)
    order = list(range(k))
    if spec["node_shuffle"]:
        rng.shuffle(order)

    def add(a, b):
        if a != b:
            pairs.add((min(a, b), max(a, b)))

    if "ring" in algo:
        for j in range(k):
            a_blk, b_blk = blocks[order[j]], blocks[order[(j + 1) % k]]
            for c in range(nch):
                off = 0 if spec["exit"] == "rail" else len(a_blk) - 1
                add(a_blk[(c + off) % len(a_blk)], b_blk[c % len(b_blk)])
    if "tree" in algo:
        rot = order[1:] + order[:1]
        for perm in (order, rot[::-1]):            # NCCL-like double binary tree
            for j in range(1, k):
                pa, ch = blocks[perm[(j - 1) // 2]], blocks[perm[j]]
                for c in range(nch):
                    add(pa[c % len(pa)], ch[c % len(ch)])
    return pairs


def pp_pairs(members, spec):
    gph, vis = spec["gph"], spec["intra"] == "container"
    pairs = set()
    links = list(zip(members, members[1:]))
    if spec["pp_wrap"] and len(members) > 2:       # tied embeddings / interleaved 1F1B
        links.append((members[0], members[-1]))
    for a, b in links:
        if vis or a // gph != b // gph:
            pairs.add((min(a, b), max(a, b)))
    return pairs


def clip(x, lo=0.0001, hi=1.0):
    return max(lo, min(hi, x))


def build_job(seed, index, max_ranks):
    spec, rng = sample_spec(seed, index, max_ranks)
    tp, dp, pp = spec["grid"]
    n = tp * dp * pp
    groups = true_groups(spec["order"], spec["grid"], n)
    sigma = rng.uniform(0.02, 0.12)
    base = {"tp": rng.uniform(0.85, 1.0), "pp": rng.uniform(0.75, 1.0),
            "dp": rng.uniform(0.25, 0.6) if rng.random() < 0.25 else rng.uniform(0.6, 1.0)}
    real = {}                                      # pair -> (kind, steadiness)
    for kind in KINDS:
        for g in groups[kind]:
            if len(g) < 2:
                continue
            if kind == "tp":
                ps = collective(g, spec["tp_algo"], spec, rng)
            elif kind == "dp":
                ps = collective(g, spec["dp_algo"], spec, rng)
            else:
                ps = pp_pairs(g, spec)
            for p in ps:
                s = base[kind] + rng.gauss(0, sigma)
                if rng.random() < 0.03:            # flaky connection, re-established often
                    s = rng.uniform(0.05, 0.4)
                real[p] = (kind, clip(s))
    per_kind = collections.Counter(kind for kind, _ in real.values())
    hidden = [k for k, d in zip(KINDS, spec["grid"]) if d > 1 and per_kind[k] == 0]

    noise = {}
    tags = []

    def add_noise(p, s):
        a, b = p
        if a == b:
            return
        p = (min(a, b), max(a, b))
        noise[p] = max(noise.get(p, 0.0), clip(s))

    if spec["world_ring"]:                         # world communicator (barriers, logging)
        tags.append("world")
        lvl = rng.uniform(0.02, 0.35)
        for p in collective(list(range(n)), "ring", spec, rng, nch=1):
            add_noise(p, lvl + rng.gauss(0, 0.05))
    if spec["mp_group"] and tp * pp > 1 and dp > 1:  # grad-norm / found-inf over TPxPP
        tags.append("mp")
        lvl = rng.uniform(0.1, 0.6)
        mp = collections.defaultdict(list)
        for r in range(n):
            mp[coords(spec["order"], spec["grid"], r)[1]].append(r)
        for g in mp.values():
            for p in collective(g, "ring", spec, rng, nch=1):
                add_noise(p, lvl + rng.gauss(0, 0.05))
    if spec["ckpt_star"]:                          # checkpoint coordinator gathers
        tags.append("ckpt")
        centre = rng.choice([0, n - 1])
        for r in rng.sample(range(n), max(1, int(n * rng.uniform(0.1, 1.0)))):
            add_noise((centre, r), rng.uniform(0.01, 0.1))
    strays = int(n * rng.uniform(0.0, 0.01)) + rng.randint(0, 3)
    steady_strays = 0
    for _ in range(strays):
        a, b = rng.randrange(n), rng.randrange(n)
        if rng.random() < 0.15:
            steady_strays += 1
            add_noise((a, b), rng.uniform(0.7, 1.0))
        else:
            add_noise((a, b), rng.uniform(0.01, 0.3))
    if steady_strays:
        tags.append("steady-stray")

    edges = dict(noise)
    for p, (_, s) in real.items():
        edges[p] = max(edges.get(p, 0.0), s)

    miss = {"none": 0.0, "low": rng.uniform(0.0, 0.05), "high": rng.uniform(0.05, 0.2)}[spec["missing"]]
    out_host = None
    nhosts = (n + spec["gph"] - 1) // spec["gph"]
    if spec["host_out"] and nhosts >= 4:
        out_host = rng.randrange(nhosts)
        tags.append("host-out")
    k = spec["intervals"]
    final = []
    for (a, b), s in edges.items():
        if miss and rng.random() < miss:
            continue
        if out_host is not None and out_host in (a // spec["gph"], b // spec["gph"]):
            continue
        if k:
            s = max(1, round(s * k)) / k
        if rng.random() < 0.5:
            a, b = b, a
        final.append([a, b, round(s, 4)])
    rng.shuffle(final)
    name = "job-%d" % index
    truth = {
        "job": name, "ranks": n, "class": spec["class"],
        "grid": {"tp": tp, "dp": dp, "pp": pp},
        "order": spec["order"], "gpus_per_host": spec["gph"], "intra_host": spec["intra"],
        "dp_algo": spec["dp_algo"], "tp_algo": spec["tp_algo"], "channels": spec["channels"],
        "pp_wrap": spec["pp_wrap"], "intervals": k, "missing_rate": round(miss, 4),
        "noise": tags, "hidden": hidden,
        "real_edges": {kk: per_kind[kk] for kk in KINDS}, "noise_edges": len(noise),
        "edges": len(final), "groups": groups,
    }
    return {"job": name, "ranks": n, "edges": final}, truth


def truth_path(out):
    return (out[:-5] if out.endswith(".json") else out) + ".truth.json"


def generate(seed, count, max_ranks, out):
    jobs, truths = [], []
    for i in range(count):
        j, t = build_job(seed, i, max_ranks)
        jobs.append(j)
        truths.append(t)
    with open(out, "w") as f:
        json.dump({"jobs": jobs}, f, separators=(",", ":"))
    with open(truth_path(out), "w") as f:
        json.dump({"seed": str(seed), "max_ranks": max_ranks, "jobs": truths}, f,
                  separators=(",", ":"))
    return truths


# ------------------------------------------------------------------ scoring

def comb2(x):
    return x * (x - 1) // 2


def canon(labels):
    seen = {}
    return [seen.setdefault(x, len(seen)) for x in labels]


def ari(a, b):
    """Adjusted Rand index of two labelings of the same n items."""
    if canon(a) == canon(b):
        return 1.0
    n = len(a)
    idx = sum(comb2(v) for v in collections.Counter(zip(a, b)).values())
    sa = sum(comb2(v) for v in collections.Counter(a).values())
    sb = sum(comb2(v) for v in collections.Counter(b).values())
    tot = comb2(n)
    if tot == 0:
        return 0.0
    expected = sa * sb / tot
    top = (sa + sb) / 2
    if top == expected:
        return 0.0
    return (idx - expected) / (top - expected)


def labels_from_groups(groups, n):
    """Labels per rank; ranks not listed are singletons.  Returns (labels, problems)."""
    lab = [-1] * n
    bad = 0
    if groups is not None and not isinstance(groups, list):
        groups, bad = [], 1
    for gi, g in enumerate(groups or []):
        if not isinstance(g, list):
            bad += 1
            continue
        for r in g:
            if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < n or lab[r] != -1:
                bad += 1
                continue
            lab[r] = gi
    nxt = len(groups or [])
    for r in range(n):
        if lab[r] == -1:
            lab[r] = nxt
            nxt += 1
    return lab, bad


def run_engine(binary, inp, timeout):
    """(parsed output or None, problem string or None, wall seconds)."""
    t0 = time.monotonic()
    try:
        cp = subprocess.run([binary, "jobs", "--input", inp], capture_output=True,
                            timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %.0f s" % timeout, time.monotonic() - t0
    except OSError as e:
        return None, "could not start: %s" % e, time.monotonic() - t0
    wall = time.monotonic() - t0
    err = cp.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
    if cp.returncode != 0:
        return None, "exit %d; stderr tail: %s" % (cp.returncode, " | ".join(err) or "-"), wall
    try:
        out = json.loads(cp.stdout.decode("utf-8", "replace"))
    except ValueError as e:
        head = cp.stdout[:120].decode("utf-8", "replace")
        return None, "bad JSON on stdout (%s); starts %r" % (e, head), wall
    if not isinstance(out, dict) or not isinstance(out.get("jobs"), list):
        return None, "output JSON has no \"jobs\" list", wall
    return out, None, wall


def grid_of(x):
    if not isinstance(x, dict):
        return None
    try:
        g = tuple(x[k] for k in KINDS)
    except KeyError:
        return None
    return g if all(isinstance(v, int) and not isinstance(v, bool) for v in g) else None


def score_job(truth, res):
    n = truth["ranks"]
    tg = tuple(truth["grid"][k] for k in KINDS)
    rec = {"job": truth["job"], "truth": truth, "true_grid": tg, "grid": None,
           "determined": False, "seconds": None, "aris": None, "score": 0.0,
           "status": "ok", "malformed": 0}
    if res is None:
        rec["status"] = "missing"
        return rec
    rec["grid"] = grid_of(res.get("grid"))
    rec["determined"] = res.get("determined") is True
    sec = res.get("seconds")
    if isinstance(sec, (int, float)) and not isinstance(sec, bool) and math.isfinite(sec):
        rec["seconds"] = float(sec)
    groups = res.get("groups")
    if groups is not None and not isinstance(groups, dict):
        groups, rec["malformed"] = {}, 1
    groups = groups or {}
    aris = {}
    for k in KINDS:
        tl, _ = labels_from_groups(truth["groups"][k], n)
        el, bad = labels_from_groups(groups.get(k), n)
        rec["malformed"] += bad
        aris[k] = ari(tl, el)
    rec["aris"] = aris
    rec["score"] = min(aris.values())
    # Added after the blind figures: an undetermined answer may list the
    # layouts it could not tell from its choice ("alternatives", each with
    # "groups"); the best of them is scored like the choice.
    rec["alt_score"] = None
    alts = res.get("alternatives")
    if not rec["determined"] and isinstance(alts, list):
        best = None
        for alt in alts[:MAX_ALTERNATIVES]:
            ag = alt.get("groups") if isinstance(alt, dict) else None
            if not isinstance(ag, dict):
                continue
            sc = min(ari(labels_from_groups(truth["groups"][k], n)[0],
                         labels_from_groups(ag.get(k), n)[0]) for k in KINDS)
            best = sc if best is None else max(best, sc)
        rec["alt_score"] = best
    if rec["malformed"]:
        rec["status"] = "malformed"
    return rec


def bucket(n):
    for b in BUCKETS:
        if n <= b:
            return b
    return BUCKETS[-1]


def summarise(recs):
    scores = [r["score"] for r in recs]
    slow = {}
    for b in BUCKETS:
        s = [r["seconds"] for r in recs if bucket(r["truth"]["ranks"]) == b and r["seconds"] is not None]
        slow[b] = max(s) if s else None
    return {
        "jobs": len(recs),
        "good": sum(1 for s in scores if s >= 0.95),
        "median": statistics.median(scores) if scores else None,
        "min": min(scores) if scores else None,
        "grid_ok": sum(1 for r in recs if r["grid"] == r["true_grid"]),
        "undetermined": sum(1 for r in recs if r["status"] != "missing" and not r["determined"]),
        # The truth among an undetermined answer's alternatives.
        "in_alt": sum(1 for r in recs if r["score"] < 0.95 and (r.get("alt_score") or 0) >= 0.95),
        # Said to be determined, and wrong.
        "det_wrong": sum(1 for r in recs if r["determined"] and r["score"] < 0.95),
        "slowest": slow,
    }


def fmt(x, f="%.3f"):
    return "-" if x is None else f % x


def conditions(t):
    c = ["order:" + t["order"], "intra:" + t["intra_host"],
         "hidden:" + ("+".join(t["hidden"]) or "none"),
         "dp_algo:" + t["dp_algo"], "gph:%d" % t["gpus_per_host"]]
    if t["missing_rate"] >= 0.05:
        c.append("missing>=5%")
    if max(t["grid"].values()) > 1 and any(
            v & (v - 1) for v in t["grid"].values()):
        c.append("non-pow2-degree")
    if t["grid"]["tp"] > t["gpus_per_host"]:
        c.append("tp>host")
    c += ["noise:" + x for x in t["noise"]]
    return c


def report(recs, args, engine_note, wall, gen_secs, w=sys.stdout.write):
    w("seed %s  jobs %d  max-ranks %d  generate %.1f s  engine wall %.1f s\n"
      % (args.seed, len(recs), args.max_ranks, gen_secs, wall))
    w("engine: %s\n" % engine_note)
    st = collections.Counter(r["status"] for r in recs)
    if st["missing"] or st["malformed"]:
        w("jobs missing from output: %d   jobs with malformed groups: %d\n"
          % (st["missing"], st["malformed"]))
    w("\nscore = min over tp/dp/pp of the adjusted Rand index; slowest = engine 'seconds' by size\n")
    w("in_alt = undetermined, and an alternative it lists scores >= .95; det_wrong = determined and < .95\n")
    hdr = "%-16s %5s %6s %7s %7s %7s %6s %6s %9s %9s %9s %9s\n"
    w(hdr % ("class", "jobs", ">=.95", "median", "min", "grid_ok", "undet", "in_alt",
             "det_wrong", "slow<=64", "slow<=512", "slow<=4096"))
    rows = [(c, [r for r in recs if r["truth"]["class"] == c]) for c in CLASSES]
    rows = [x for x in rows if x[1]] + [("ALL", recs)]
    for name, rs in rows:
        s = summarise(rs)
        w(hdr % (name, s["jobs"], s["good"], fmt(s["median"]), fmt(s["min"]), s["grid_ok"],
                 s["undetermined"], s["in_alt"], s["det_wrong"],
                 *(fmt(s["slowest"][b], "%.4f") for b in BUCKETS)))
    w("\nby condition\n")
    hdr2 = "%-22s %5s %6s %7s %7s %7s %6s\n"
    w(hdr2 % ("condition", "jobs", ">=.95", "median", "min", "grid_ok", "undet"))
    conds = collections.defaultdict(list)
    for r in recs:
        for c in conditions(r["truth"]):
            conds[c].append(r)
    for c in sorted(conds):
        s = summarise(conds[c])
        w(hdr2 % (c, s["jobs"], s["good"], fmt(s["median"]), fmt(s["min"]), s["grid_ok"],
                  s["undetermined"]))
    worst = sorted(recs, key=lambda r: (r["score"], -r["truth"]["ranks"]))[:args.worst]
    if worst:
        w("\nworst %d jobs (replay: jobs.py generate --seed %s --jobs %d --out F.json)\n"
          % (len(worst), args.seed, args.jobs))
    for r in worst:
        t = r["truth"]
        g = "x".join(map(str, r["grid"])) if r["grid"] else "null"
        a = r["aris"]
        aris = ("tp %.3f dp %.3f pp %.3f" % (a["tp"], a["dp"], a["pp"])) if a else r["status"]
        w("  %-8s %-7s N=%-5d truth %-11s engine %-11s %-5s %s  score %.3f\n"
          % (r["job"], t["class"], t["ranks"], "x".join(map(str, r["true_grid"])), g,
             "det" if r["determined"] else "undet", aris, r["score"]))
        w("           %s gph %d %s dp:%s tp:%s pp_wrap %s hidden %s miss %.3f noise %s edges %d\n"
          % (t["order"], t["gpus_per_host"], t["intra_host"], t["dp_algo"], t["tp_algo"],
             t["pp_wrap"], ",".join(t["hidden"]) or "-", t["missing_rate"],
             ",".join(t["noise"]) or "-", t["edges"]))


def to_containers(inp, truths):
    """Added later (not part of the blind generator): rewrite the input as
    the skeleton is seen online, between containers. A job whose GPUs talk
    over NVLink inside a host runs a container per host: its edges become
    pairs of containers (ranks // GPUs per host, the container's rank count
    that the exporters publish), and pairs inside one container vanish. A
    job with a GPU per container is left as it is."""
    with open(inp) as f:
        doc = json.load(f)
    by_name = {t["job"]: t for t in truths}
    for j in doc["jobs"]:
        t = by_name[j["job"]]
        if t["intra_host"] != "nvlink":
            continue
        g = t["gpus_per_host"]
        pairs = {}
        for a, b, steady in j["edges"]:
            x, y = sorted((a // g, b // g))
            if x != y:
                pairs[(x, y)] = max(pairs.get((x, y), 0.0), steady)
        j["ranks_per_container"] = g
        j["edges"] = [[x, y, v] for (x, y), v in sorted(pairs.items())]
    with open(inp, "w") as f:
        json.dump(doc, f)


def cmd_score(args):
    t0 = time.monotonic()
    tmp = args.keep or tempfile.mkdtemp(prefix="blind-jobs-")
    try:
        os.makedirs(tmp, exist_ok=True)
        inp = os.path.join(tmp, "jobs.json")
        truths = generate(args.seed, args.jobs, args.max_ranks, inp)
        if args.containers:
            to_containers(inp, truths)
        gen_secs = time.monotonic() - t0
        out, problem, wall = run_engine(args.analyze, inp, args.timeout)
        if args.keep and out is not None:
            with open(os.path.join(tmp, "engine.json"), "w") as f:
                json.dump(out, f)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    by_name, dup, junk = {}, 0, 0
    if out is not None:
        for j in out["jobs"]:
            if not isinstance(j, dict) or not isinstance(j.get("job"), str):
                junk += 1
            elif j["job"] in by_name:
                dup += 1
            else:
                by_name[j["job"]] = j
    recs = [score_job(t, by_name.get(t["job"])) for t in truths]
    if problem:
        note = "FAILED: " + problem + " (every job scored 0)"
    else:
        known = {t["job"] for t in truths}
        extra = sum(1 for k in by_name if k not in known)
        note = "ok, %d job entries" % len(out["jobs"])
        if dup or junk or extra:
            note += " (%d duplicate, %d unreadable, %d unknown names)" % (dup, junk, extra)
    report(recs, args, note, wall, gen_secs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": args.seed, "engine": note, "jobs": [
                {"job": r["job"], "class": r["truth"]["class"], "ranks": r["truth"]["ranks"],
                 "true_grid": r["true_grid"], "grid": r["grid"], "determined": r["determined"],
                 "aris": r["aris"], "score": r["score"], "seconds": r["seconds"],
                 "status": r["status"], "conditions": conditions(r["truth"])}
                for r in recs]}, f, indent=1)
    print("seed %s (replay with --seed %s)" % (args.seed, args.seed), file=sys.stderr)
    return 0


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("generate", "score"):
        p = sub.add_parser(name)
        p.add_argument("--jobs", type=int, required=True, help="number of jobs")
        p.add_argument("--seed", default=None, help="run seed (default: drawn fresh)")
        p.add_argument("--max-ranks", type=int, default=4096, help="largest job (8..4096)")
        if name == "generate":
            p.add_argument("--out", required=True, help="input file to write (truth beside it)")
        else:
            p.add_argument("--analyze", required=True, help="engine binary (skeletonhunter-localizer)")
            p.add_argument("--keep", default=None, help="keep input, truth and output here")
            p.add_argument("--timeout", type=float, default=3600.0, help="seconds for the engine run")
            p.add_argument("--worst", type=int, default=10, help="worst jobs to list")
            p.add_argument("--json", default=None, help="write per-job scores as JSON here")
            p.add_argument("--containers", action="store_true",
                           help="score the skeleton as seen online, between containers of a host's GPUs")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        usage_error("--jobs must be at least 1")
    if not 8 <= args.max_ranks <= 4096:
        usage_error("--max-ranks must be in 8..4096")
    if args.cmd == "score":
        if args.timeout <= 0 or args.worst < 0:
            usage_error("--timeout must be positive and --worst non-negative")
        if args.keep and os.path.exists(args.keep) and os.listdir(args.keep):
            usage_error("--keep %r exists and is not empty" % args.keep)
    if args.seed is None:
        args.seed = str(secrets.randbelow(2 ** 40))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.cmd == "generate":
        print("seed %s (replay with --seed %s)" % (args.seed, args.seed), file=sys.stderr)
        truths = generate(args.seed, args.jobs, args.max_ranks, args.out)
        print("wrote %s and %s: %d jobs, %d ranks, %d edges" % (
            args.out, truth_path(args.out), len(truths), sum(t["ranks"] for t in truths),
            sum(t["edges"] for t in truths)), file=sys.stderr)
        return 0
    return cmd_score(args)


if __name__ == "__main__":
    sys.exit(main())
