#!/usr/bin/env python3
"""Score `skeletonhunter-localizer analyze` on blind generated windows.

  python3 tests/blind/score.py --analyze target/release/skeletonhunter-localizer \
      --windows 500 [--seed S] [--sizes small,medium,large] [--json out.json] \
      [--keep DIR] [--only CLASS_OR_TAG] [--max-windows-per-class N]

Generates each window (blindgen.py), runs `analyze --pings W.csv` on it (at
most two at a time), compares its JSON with the window's truth and prints a
table.  The analyzer is a black box: only its `analyze` subcommand is used.
Standard library only.
"""
import argparse
import collections
import concurrent.futures
import csv
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blindgen  # noqa: E402
import oracle  # noqa: E402

JOBS = 2
SIDE = {"node": "node_id", "nic": "real_ip", "host": "node_sn",
        "tor": "asw", "spine": "dsw", "pod": "pod"}


def usage_error(msg):
    print("score.py: error: %s" % msg, file=sys.stderr)
    sys.exit(2)


def known_filters():
    names = {n for n, _ in blindgen.MIX}
    syms = ("loss", "latency", "unreachable")
    tags = set(blindgen.KINDS) | set(syms)
    tags |= {"%s_%s" % (k, s) for k in blindgen.KINDS for s in syms}
    return names | tags


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--analyze", required=True, help="path of the analyzer binary")
    ap.add_argument("--windows", type=int, default=500, help="windows in all (split over sizes)")
    ap.add_argument("--seed", default=None, help="run seed (default: drawn fresh)")
    ap.add_argument("--sizes", default="small,medium,large")
    ap.add_argument("--json", default=None, help="write the figures as JSON here")
    ap.add_argument("--keep", default=None, help="keep every window's CSV, truth and output here")
    ap.add_argument("--only", default=None, help="only windows of this class or tag")
    ap.add_argument("--max-windows-per-class", type=int, default=0,
                    help="score at most N windows of each class (0: no cap)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per analyze run")
    ap.add_argument("--worst", type=int, default=10, help="worst windows to list")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        sys.exit(2 if e.code else 0)
    check_args(args)
    return args


def check_args(args):
    if not (1 <= args.windows <= 100000):
        usage_error("--windows must be between 1 and 100000, got %d" % args.windows)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    bad = [s for s in sizes if s not in blindgen.SIZES]
    if not sizes or bad:
        usage_error("--sizes takes a comma list of %s, got %r" % (",".join(blindgen.SIZES),
                                                                   args.sizes))
    args.sizes = sizes
    if not (os.path.isfile(args.analyze) and os.access(args.analyze, os.X_OK)):
        usage_error("--analyze %r is not an executable file" % args.analyze)
    if args.only is not None and args.only not in known_filters():
        usage_error("--only %r is not a class or tag; one of: %s"
                    % (args.only, ", ".join(sorted(known_filters()))))
    if args.max_windows_per_class < 0 or not (0 < args.timeout <= 86400) or args.worst < 0:
        usage_error("--max-windows-per-class, --timeout and --worst must be positive")
    if args.keep and os.path.exists(args.keep) and os.listdir(args.keep):
        usage_error("--keep %r exists and is not empty" % args.keep)
    if args.seed is None:
        args.seed = str(secrets.randbelow(2 ** 40))
    args.skipped = []


# ----------------------------------------------------------------- analyze

# The analyzer is started by a small helper that forks it and reports its own
# os.wait4 rusage: a child exec'ed straight from this (large) Python process
# would inherit this process's RSS high-water mark in ru_maxrss.  The helper's
# own footprint (about 5 MiB) is therefore the floor of the RSS figure.
HELPER = """import os, sys, time
t = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, st, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write("%d %d %.6f\\n" % (os.waitstatus_to_exitcode(st), ru.ru_maxrss,
                                time.monotonic() - t))
"""


def run_analyze(binary, csv_path, timeout):
    """Runs analyze on one window; returns (report or None, error, wall s, peak RSS KiB)."""
    base = csv_path[:-4]
    out_path, err_path, ru_path = base + ".out.json", base + ".err.txt", base + ".rusage"
    cmd = [sys.executable, "-S", "-I", "-c", HELPER, ru_path,
           binary, "analyze", "--pings", csv_path]
    t0 = time.monotonic()
    with open(out_path, "wb") as so, open(err_path, "wb") as se:
        proc = subprocess.Popen(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, "timeout after %.0f s" % timeout, time.monotonic() - t0, 0
    try:
        with open(ru_path) as fh:
            code, rss, wall = fh.read().split()
        os.remove(ru_path)
    except (OSError, ValueError):
        return None, "helper failed (exit %s)" % proc.returncode, time.monotonic() - t0, 0
    code, rss, wall = int(code), int(rss), float(wall)
    if code != 0:
        with open(err_path, encoding="utf-8", errors="replace") as fh:
            return None, "exit %d: %s" % (code, fh.read(300).strip()), wall, rss
    try:
        with open(out_path, encoding="utf-8") as fh:
            return json.load(fh), None, wall, rss
    except ValueError as e:
        return None, "bad JSON: %s" % e, wall, rss


# ----------------------------------------------------------------- scoring

def observed_pairs(csv_path):
    """Unordered pairs with a row in the CSV -> (side a, side b) topology."""
    return read_window(csv_path)[0]


def read_window(csv_path):
    """One pass over the CSV: `observed_pairs`, and per unordered pair
    [probes, lost] (10 probes a row) for oracle.py."""
    pairs, counts = {}, {}
    with open(csv_path, encoding="utf-8-sig", newline="") as fh:
        rd = csv.reader(fh)
        head = next(rd)
        col = {name: i for i, name in enumerate(head)}
        src = {k: col["src_" + v] for k, v in SIDE.items()}
        dst = {k: col["dst_" + v] for k, v in SIDE.items()}
        si, di, li = src["node"], dst["node"], col["loss_rate"]
        for row in rd:
            key = (row[si], row[di]) if row[si] <= row[di] else (row[di], row[si])
            if key not in pairs:
                pairs[key] = ({k: row[i] for k, i in src.items()},
                              {k: row[i] for k, i in dst.items()})
            try:
                lost = round(float(row[li] or 0) * 10)
            except ValueError:
                continue
            c = counts.setdefault(key, [0, 0])
            c[0] += 10
            c[1] += min(max(lost, 0), 10)
    return pairs, counts


def component_sets(pairs):
    """(kind, id) -> frozenset of observed pairs crossing it (path model)."""
    sets = collections.defaultdict(set)
    for key, (sa, sb) in pairs.items():
        for comp in blindgen.path_of(sa, sb):
            sets[comp].add(key)
    return {c: frozenset(s) for c, s in sets.items()}


def report_matches(rep, truth, sets, observed):
    """Indexes of true faults this report names (itself or an `equivalent`),
    and whether any was matched only by the ECMP rule."""
    names = [(rep.get("kind"), rep.get("id"))]
    names += [(e.get("kind"), e.get("id")) for e in rep.get("equivalent") or ()]
    hit, ecmp_only = set(), False
    for name in names:
        s = sets.get(name)
        for j, (key, tset, hits) in enumerate(truth):
            if name == key or (s and s == tset):
                hit.add(j)
            elif hits and name[0] == "spine" and s and hits <= s:
                hit.add(j)                # the hit flows all cross it too
                ecmp_only = True
    return hit, ecmp_only


def truth_keys(truth, sets, observed):
    """Per true fault: (kind, id), its observed pairs, its observed hit flows."""
    out = []
    for f in truth["faults"]:
        key = (f["kind"], f["id"])
        hits = frozenset(tuple(p) for p in f.get("hit_pairs") or ()) & observed
        out.append((key, sets.get(key, frozenset()), hits or None))
    return out


def score_window(truth, csv_path, report):
    pairs, counts = read_window(csv_path)
    sets = component_sets(pairs)
    tk = truth_keys(truth, sets, frozenset(pairs))
    reports = (report or {}).get("faults") or []
    found = [None] * len(tk)              # symptom of the first report naming it
    correct = ecmp_rule = 0
    first_ok = None
    for rank, rep in enumerate(reports):
        hit, ecmp_only = report_matches(rep, tk, sets, pairs)
        if rank == 0:
            first_ok = bool(hit)
        correct += bool(hit)
        ecmp_rule += ecmp_only
        for j in hit:
            if found[j] is None:
                found[j] = rep.get("symptom")
    return {"reports": len(reports), "correct": correct, "false": len(reports) - correct,
            "found": [s is not None for s in found],
            **detectability(truth, counts, sets, pairs),
            "symptom_ok": [s == f["symptom"] for s, f in zip(found, truth["faults"])
                           if s is not None],
            "top1": first_ok if tk else None, "ecmp_rule_matches": ecmp_rule,
            "first": short(reports[0]) if reports else None,
            "unobserved_truth": sum(1 for _, s, _ in tk if not s)}


def detectability(truth, counts, sets, pairs):
    """Per true fault: can the probes show it (oracle.py), told the
    component, and at the family-wise bar."""
    ps = oracle.p_values(truth, counts, sets, frozenset(pairs))
    bar = oracle.family_level(sets)
    return {"detectable": [p < oracle.LEVEL for p in ps],
            "detectable_fw": [p < bar for p in ps]}


def short(rep):
    return "%s %s.. %s %.3g" % (rep.get("kind"), str(rep.get("id"))[:8], rep.get("symptom"),
                                rep.get("score") or 0.0)


# ------------------------------------------------------------- aggregation

def ratio(n, d):
    return round(n / d, 4) if d else None


def summarize(recs):
    faulty = [r for r in recs if r["truth"]["faults"]]
    healthy = [r for r in recs if not r["truth"]["faults"]]
    found = [x for r in recs for x in r["score"]["found"]]
    seen = [f for r in recs for f, d in zip(r["score"]["found"], r["score"]["detectable"]) if d]
    seen_fw = [f for r in recs for f, d in zip(r["score"]["found"], r["score"]["detectable_fw"])
               if d]
    sym = [x for r in recs for x in r["score"]["symptom_ok"]]
    reports = sum(r["score"]["reports"] for r in recs)
    walls = sorted(r["wall"] for r in recs)
    rss = [r["rss_kib"] for r in recs]
    return {
        "windows": len(recs), "faulty": len(faulty), "healthy": len(healthy),
        "reports": reports, "precision": ratio(sum(r["score"]["correct"] for r in recs),
                                               reports),
        "true_faults": len(found), "recall": ratio(sum(found), len(found)),
        "detectable": len(seen), "recall_detectable": ratio(sum(seen), len(seen)),
        "detectable_fw": len(seen_fw), "recall_detectable_fw": ratio(sum(seen_fw), len(seen_fw)),
        "top1": ratio(sum(1 for r in faulty if r["score"]["top1"]), len(faulty)),
        "symptom_agreement": ratio(sum(sym), len(sym)),
        "healthy_flagged": ratio(sum(1 for r in healthy if r["score"]["reports"]),
                                 len(healthy)),
        "windows_over_2_false": sum(1 for r in recs if r["score"]["false"] > 2),
        "errors": sum(1 for r in recs if r["error"]),
        "ecmp_rule_matches": sum(r["score"]["ecmp_rule_matches"] for r in recs),
        "wall_s": {"mean": round(sum(walls) / len(walls), 3) if walls else None,
                   "p95": round(walls[int(0.95 * (len(walls) - 1))], 3) if walls else None,
                   "max": round(walls[-1], 3) if walls else None},
        "peak_rss_mib": {"mean": round(sum(rss) / len(rss) / 1024, 1) if rss else None,
                         "max": round(max(rss) / 1024, 1) if rss else None},
        "rows_mean": round(sum(r["truth"]["fabric"]["rows"] for r in recs) / len(recs))
        if recs else None,
    }


def fault_categories(rec, fault):
    cats = ["%s_%s" % (fault["kind"], fault["symptom"]), "class:" + rec["truth"]["class"]]
    if "ecmp_fraction" in fault:
        cats.append("ecmp_partial")
    return cats


def per_category(recs):
    acc = collections.OrderedDict()
    for rec in recs:
        sc = rec["score"]
        sym = iter(sc["symptom_ok"])
        for fault, ok, det in zip(rec["truth"]["faults"], sc["found"], sc["detectable"]):
            s = next(sym) if ok else None
            for cat in fault_categories(rec, fault):
                a = acc.setdefault(cat, [0, 0, 0, 0, 0])
                a[0] += 1
                a[1] += ok
                a[2] += bool(s)
                a[3] += det
                a[4] += det and ok
    return {c: {"faults": n, "found": f, "recall": ratio(f, n),
                "symptom_agreement": ratio(s, f), "detectable": d,
                "recall_detectable": ratio(fd, d)}
            for c, (n, f, s, d, fd) in sorted(acc.items())}


def badness(rec):
    sc = rec["score"]
    return (10 if rec["error"] else 0) + sc["found"].count(False) * 2 + sc["false"]


def worst_windows(recs, seed, n):
    out = []
    for rec in sorted(recs, key=lambda r: (-badness(r), r["index"]))[:n]:
        if badness(rec) == 0:
            break
        t = rec["truth"]
        out.append({"seed": seed, "index": rec["index"], "size": t["size"],
                    "class": t["class"], "missed": rec["score"]["found"].count(False),
                    "false_reports": rec["score"]["false"], "error": rec["error"],
                    "truth": ["%s %s.. %s" % (f["kind"], f["id"][:8], f["symptom"])
                              for f in t["faults"]],
                    "first_report": rec["score"]["first"]})
    return out


def figures(recs, args):
    by_size = collections.OrderedDict(
        (s, summarize([r for r in recs if r["truth"]["size"] == s])) for s in args.sizes)
    classes = sorted({r["truth"]["class"] for r in recs})
    by_class = collections.OrderedDict(
        (c, summarize([r for r in recs if r["truth"]["class"] == c])) for c in classes)
    return {"seed": args.seed, "windows": len(recs), "sizes": args.sizes, "only": args.only,
            "skipped_windows": args.skipped,
            "overall": summarize(recs), "by_size": by_size, "by_class": by_class,
            "by_fault": per_category(recs),
            "worst": worst_windows(recs, args.seed, args.worst)}


# ------------------------------------------------------------------ output

def fmt(x, pct=True):
    if x is None:
        return "-"
    return "%.1f%%" % (100 * x) if pct else str(x)


def print_table(fig, out=sys.stdout):
    w = out.write
    w("seed %s  windows %d  sizes %s%s\n\n" % (fig["seed"], fig["windows"], ",".join(fig["sizes"]),
                                              "  only " + fig["only"] if fig["only"] else ""))
    if fig["skipped_windows"]:
        w("windows not generated (I/O errors): %s\n\n" % fig["skipped_windows"])
    head = ("%-26s %5s %5s %5s %7s %7s %7s %7s %8s %5s %4s %22s %17s\n"
            % ("group", "win", "fault", "rows", "prec", "recall", "top1", "sympt",
               "hlthflag", ">2fp", "err", "wall s mean/p95/max", "RSS MiB mean/max"))
    w(head)
    groups = [("all", fig["overall"])] + [("size:" + k, v) for k, v in fig["by_size"].items()]
    groups += [("class:" + k, v) for k, v in fig["by_class"].items()]
    for name, s in groups:
        wall = s["wall_s"]
        w("%-26s %5d %5d %5s %7s %7s %7s %7s %8s %5d %4d %22s %17s\n" % (
            name, s["windows"], s["faulty"], s["rows_mean"] if s["rows_mean"] else "-",
            fmt(s["precision"]), fmt(s["recall"]), fmt(s["top1"]),
            fmt(s["symptom_agreement"]), fmt(s["healthy_flagged"]),
            s["windows_over_2_false"], s["errors"],
            "%s/%s/%s" % (wall["mean"], wall["p95"], wall["max"]),
            "%s/%s" % (s["peak_rss_mib"]["mean"], s["peak_rss_mib"]["max"])))
    w("\nreports correct only by the ECMP rule (another spine crossed by all hit flows): %d\n"
      % fig["overall"]["ecmp_rule_matches"])
    o = fig["overall"]
    w("true faults the probes can show (oracle.py), told the component (p < %g): %d of %d,"
      " recall of those %s; at the family-wise bar (p < %g / components): %d, recall %s\n"
      % (oracle.LEVEL, o["detectable"], o["true_faults"], fmt(o["recall_detectable"]),
         oracle.FAMILY_ALPHA, o["detectable_fw"], fmt(o["recall_detectable_fw"])))
    w("\n%-28s %6s %6s %7s %7s %6s %7s\n" % ("true fault category", "faults", "found",
                                              "recall", "sympt", "detect", "rec|det"))
    for cat, c in fig["by_fault"].items():
        w("%-28s %6d %6d %7s %7s %6d %7s\n" % (
            cat, c["faults"], c["found"], fmt(c["recall"]), fmt(c["symptom_agreement"]),
            c["detectable"], fmt(c["recall_detectable"])))
    if fig["worst"]:
        w("\nworst windows (replay: blindgen.py --seed SEED --index I --size SIZE --out DIR)\n")
    for x in fig["worst"]:
        w("  seed %s index %d %-6s %-18s missed %d false %d%s\n    truth %s\n    first %s\n" % (
            x["seed"], x["index"], x["size"], x["class"], x["missed"], x["false_reports"],
            "  ERROR " + x["error"] if x["error"] else "", "; ".join(x["truth"]) or "(healthy)",
            x["first_report"]))


# -------------------------------------------------------------------- main

def plan(args):
    return [(i, args.sizes[i % len(args.sizes)]) for i in range(args.windows)]


def finish(job, args, recs, per_class):
    fut, csv_path, truth = job
    report, error, wall, rss = fut.result()
    rec = {"index": truth["index"], "truth": truth, "error": error, "wall": wall,
           "rss_kib": rss, "score": score_window(truth, csv_path, report)}
    recs.append(rec)
    if not args.keep:
        drop_files(csv_path[:-4])


def drop_files(base):
    for suffix in (".csv", ".truth.json", ".out.json", ".err.txt", ".rusage"):
        if os.path.exists(base + suffix):
            os.remove(base + suffix)


def run(args, workdir):
    recs, per_class, pending = [], collections.Counter(), collections.deque()
    skipped = args.skipped
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=JOBS) as ex:
        for n, (i, size) in enumerate(plan(args)):
            try:
                csv_path, _, truth = blindgen.write_window(args.seed, i, size, workdir,
                                                           args.only)
            except OSError as e:            # e.g. a full disk: skip, say so, go on
                print("  window %d (%s) not written: %s" % (i, size, e), file=sys.stderr)
                skipped.append(i)
                drop_files(os.path.join(workdir, "w%05d_%s" % (i, size)))
                continue
            cap = args.max_windows_per_class
            if cap and per_class[truth["class"]] >= cap:
                os.remove(csv_path)
                os.remove(csv_path[:-4] + ".truth.json")
                continue
            per_class[truth["class"]] += 1
            fut = ex.submit(run_analyze, args.analyze, csv_path, args.timeout)
            pending.append((fut, csv_path, truth))
            while len(pending) > JOBS:
                finish(pending.popleft(), args, recs, per_class)
            if (n + 1) % 50 == 0:
                print("  %d/%d windows generated, %.0f s" % (n + 1, args.windows,
                                                            time.monotonic() - t0),
                      file=sys.stderr)
        while pending:
            finish(pending.popleft(), args, recs, per_class)
    recs.sort(key=lambda r: r["index"])
    return recs


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    print("seed %s (replay with --seed %s)" % (args.seed, args.seed), file=sys.stderr)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        recs = run(args, args.keep)
    else:
        tmp = tempfile.mkdtemp(prefix="blind-")
        try:
            recs = run(args, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    fig = figures(recs, args)
    print_table(fig)
    if args.json:
        fig["per_window"] = [{"index": r["index"], "size": r["truth"]["size"],
                              "class": r["truth"]["class"], "error": r["error"],
                              "wall_s": round(r["wall"], 3), "rss_kib": r["rss_kib"],
                              **{k: v for k, v in r["score"].items()}} for r in recs]
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(fig, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
