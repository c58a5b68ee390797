"""Invariants of the blind generator and scorer (python3 -m unittest tests/blind/test_blind.py)."""
import csv
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blindgen  # noqa: E402
import oracle  # noqa: E402
import planesgen  # noqa: E402
import score  # noqa: E402

ORACLE = """#!%s
import json, sys
path = sys.argv[sys.argv.index("--pings") + 1]
with open(path[:-4] + ".truth.json") as fh:
    truth = json.load(fh)
print(json.dumps({"faults": [{"kind": f["kind"], "id": f["id"], "symptom": f["symptom"],
                             "score": 0.5} for f in truth["faults"]]}))
"""


def rows_of(text):
    assert text.startswith("\ufeff")
    return list(csv.DictReader(io.StringIO(text[1:])))


def side(row, prefix):
    return {k: row[prefix + v] for k, v in score.SIDE.items()}


class GeneratorTest(unittest.TestCase):
    def test_header_and_row_shape(self):
        text, _ = blindgen.generate("t1", 0, "small")
        self.assertTrue(text.startswith("\ufeff"))
        lines = text[1:].splitlines()
        self.assertEqual(lines[0].split(","), blindgen.HEADER)
        self.assertEqual(len(blindgen.HEADER), 45)
        for line in lines[1:]:
            self.assertEqual(len(line.split(",")), 45)

    def test_loss_rate_is_k_over_10_and_failed_dials_have_no_latency(self):
        for i in range(4):
            text, _ = blindgen.generate("t2", i, "small")
            for row in rows_of(text):
                k = float(row["loss_rate"]) * blindgen.PROBES
                self.assertAlmostEqual(k, round(k), places=9)
                self.assertTrue(0 <= k <= blindgen.PROBES)
                if row["dial"] != "success" or k == blindgen.PROBES:
                    self.assertEqual(row["latency"], "")
                else:
                    self.assertGreater(float(row["latency"]), 0.0)

    def test_same_seed_same_bytes(self):
        a, ta = blindgen.generate("t3", 5, "small")
        b, tb = blindgen.generate("t3", 5, "small")
        c, _ = blindgen.generate("t4", 5, "small")
        self.assertEqual(a, b)
        self.assertEqual(ta, tb)
        self.assertNotEqual(a, c)

    def test_healthy_window_truth_is_empty(self):
        for i in range(3):
            _, truth = blindgen.generate("t5", i, "small", only="healthy")
            self.assertEqual(truth["class"], "healthy")
            self.assertEqual(truth["faults"], [])

    def test_topology_is_consistent_per_container(self):
        text, _ = blindgen.generate("t6", 1, "small")
        seen = {}
        for row in rows_of(text):
            for prefix in ("src_", "dst_"):
                s = side(row, prefix)
                self.assertEqual(seen.setdefault(s["node"], s), s)

    def test_spine_latency_pairs_are_slower(self):
        checked = 0
        for i in range(12):
            text, truth = blindgen.generate("t7", i, "small", only="spine_latency")
            self.assertIn("spine_latency", truth["tags"])
            if truth["class"] not in ("single_latency", "majority_spine"):
                continue                  # ECMP-partial or stacked: not all pairs hit
            f = truth["faults"][0]
            slow, fast = [], []
            for row in rows_of(text):
                if row["latency"]:
                    comps = blindgen.path_of(side(row, "src_"), side(row, "dst_"))
                    (slow if ("spine", f["id"]) in comps else fast).append(
                        float(row["latency"]))
            gap = statistics.median(slow) - statistics.median(fast)
            self.assertGreater(gap, 0.8 * f["latency_us"])
            checked += 1
        self.assertGreaterEqual(checked, 2)

    def test_unreachable_fault_fails_dials_only_on_its_pairs(self):
        text, truth = blindgen.generate("t8", 0, "small", only="single_unreachable")
        f = truth["faults"][0]
        failed = [r for r in rows_of(text) if r["dial"] != "success"]
        self.assertTrue(failed)
        crossing = sum(1 for r in failed if (f["kind"], f["id"]) in
                       blindgen.path_of(side(r, "src_"), side(r, "dst_")))
        # a churned container's peers may fail a dial or two; the rest are the fault's
        self.assertGreaterEqual(crossing, 0.8 * len(failed))

    def test_gray_loss_is_mostly_zero_rows(self):
        text, truth = blindgen.generate("t9", 2, "medium", only="single_gray")
        f = truth["faults"][0]
        self.assertLessEqual(f["loss"], 0.05)
        rates = [r["loss_rate"] for r in rows_of(text) if (f["kind"], f["id"]) in
                 blindgen.path_of(side(r, "src_"), side(r, "dst_"))]
        self.assertGreater(rates.count("0") / len(rates), 0.5)


class PlanesGeneratorTest(unittest.TestCase):
    """planesgen.py: both planes' rows are well formed and a fault touches
    only the rows whose path crosses it (checked from the CSV columns)."""

    @staticmethod
    def footprint(f, row):
        plane = row["agent_type"]
        s = {k: row["src_" + k] for k in planesgen.SIDE_COLS}
        d = {k: row["dst_" + k] for k in planesgen.SIDE_COLS}
        cls, cid = f["class"], f["id"]
        if cls == "fwd_entry":
            return plane == "overlay" and d["node_id"] == cid
        if cls == "vport":
            return plane == "overlay" and cid in (s["node_id"], d["node_id"])
        if cls == "vswitch":
            return plane == "overlay" and cid in (s["node_sn"], d["node_sn"])
        if cls == "nic":
            return cid in (s["real_ip"], d["real_ip"])
        if cls == "host":
            return cid in (s["node_sn"], d["node_sn"])
        if cls == "tor":
            return s["node_sn"] != d["node_sn"] and cid in (s["asw"], d["asw"])
        return s["asw"] != d["asw"] and cid in (s["dsw"], d["dsw"])   # spine

    def test_rows_planes_and_fault_footprint(self):
        for cls in planesgen.CLASSES:
            text = truth = None
            for i in range(40):               # a window whose fault fails every dial
                text, truth = planesgen.generate("pt", i, only=cls)
                if cls == "healthy" or truth["faults"][0].get("fail") == 1.0:
                    break
            self.assertEqual(truth["class"], cls)
            f = truth["faults"][0] if truth["faults"] else None
            self.assertEqual(text[1:].split("\n", 1)[0].split(","), blindgen.HEADER)
            rows = rows_of(text)
            self.assertTrue(rows)
            conts, hit, planes = {}, 0, set()
            for row in rows:
                plane = row["agent_type"]
                planes.add(plane)
                self.assertIn(plane, ("overlay", "underlay"))
                self.assertIn(row["task_type"], ("RDMA_PING", "TCP_PING", "TRACEROUTE"))
                k = float(row["loss_rate"]) * blindgen.PROBES
                self.assertAlmostEqual(k, round(k), places=9)
                for p in ("src_", "dst_"):
                    if plane == "underlay":   # an RNIC of a host, no tenant
                        self.assertEqual(row[p + "tenant_id"], "")
                        self.assertRegex(row[p + "node_id"], "^%s-rnic[0-9]$" % row[p + "node_sn"])
                    else:                     # a container: one place, one job
                        self.assertNotEqual(row[p + "tenant_id"], "")
                        where = tuple(row[p + c] for c in planesgen.SIDE_COLS)
                        self.assertEqual(conts.setdefault(row[p + "node_id"], where), where)
                    if plane == "overlay" and p == "src_":
                        self.assertEqual(row["src_tenant_id"], row["dst_tenant_id"])
                inside = f is not None and self.footprint(f, row)
                if row["dial"] != "success":  # noise never fails a dial
                    self.assertTrue(inside, (cls, row["src_node_id"], row["dst_node_id"]))
                    self.assertEqual((row["latency"], row["loss_rate"]), ("", "1"))
                if inside and row["task_type"] != "TRACEROUTE" and f.get("fail") == 1.0 \
                        and cls != "spine_ecmp":
                    self.assertNotEqual(row["dial"], "success", (cls, row))
                hit += inside
            self.assertEqual(planes, {"overlay", "underlay"})
            if f is not None:
                self.assertGreater(hit, 0, cls)
            if cls == "fwd_entry":            # the reverse direction works
                back = [r for r in rows if r["src_node_id"] == f["id"]]
                self.assertTrue(back)
                self.assertTrue(all(r["dial"] == "success" for r in back))

    def test_same_seed_same_bytes(self):
        self.assertEqual(planesgen.generate("pd", 3), planesgen.generate("pd", 3))
        self.assertNotEqual(planesgen.generate("pd", 3)[0], planesgen.generate("pe", 3)[0])


class ScorerTest(unittest.TestCase):
    def test_equivalent_component_counts_as_correct(self):
        with tempfile.TemporaryDirectory() as tmp:
            csv_path, _, truth = blindgen.write_window("s1", 0, "small", tmp,
                                                       only="single_loss")
            sets = score.component_sets(score.observed_pairs(csv_path))
            key = (truth["faults"][0]["kind"], truth["faults"][0]["id"])
            twin = [c for c, s in sets.items() if s == sets[key] and c != key]
            other = [c for c, s in sets.items() if s != sets[key]][0]
            reps = [{"kind": other[0], "id": other[1], "symptom": "loss"},
                    {"kind": "pod", "id": "nothing", "symptom": "loss",
                     "equivalent": [{"kind": key[0], "id": key[1]}]}]
            sc = score.score_window(truth, csv_path, {"faults": reps})
            self.assertEqual((sc["correct"], sc["false"], sc["top1"]), (1, 1, False))
            self.assertEqual(sc["found"], [True])
            if twin:
                sc = score.score_window(truth, csv_path, {"faults": [
                    {"kind": twin[0][0], "id": twin[0][1], "symptom": "latency"}]})
                self.assertEqual((sc["correct"], sc["symptom_ok"]), (1, [False]))

    def test_ecmp_rule_accepts_only_spines_carrying_every_hit_flow(self):
        with tempfile.TemporaryDirectory() as tmp:
            csv_path, _, truth = blindgen.write_window("s2", 1, "medium", tmp,
                                                       only="ecmp_spine")
            f = truth["faults"][0]
            hits = {tuple(p) for p in f["hit_pairs"]}
            sets = score.component_sets(score.observed_pairs(csv_path))
            mine = set(sets[("spine", f["id"])])
            self.assertTrue(hits & mine)              # observed hit flows cross it
            self.assertLess(len(hits & mine), len(mine))  # and only some of its flows
            for comp, s in sets.items():
                if comp[0] != "spine" or comp[1] == f["id"]:
                    continue
                sc = score.score_window(truth, csv_path, {"faults": [
                    {"kind": "spine", "id": comp[1], "symptom": f["symptom"]}]})
                carries = hits & set(s) == hits & set(sets[("spine", f["id"])])
                self.assertEqual(sc["found"], [carries], comp)
                self.assertEqual(sc["ecmp_rule_matches"], int(carries))

    def test_oracle_scores_perfectly(self):
        with tempfile.TemporaryDirectory() as tmp:
            oracle = os.path.join(tmp, "oracle")
            with open(oracle, "w") as fh:
                fh.write(ORACLE % sys.executable)
            os.chmod(oracle, 0o755)
            out = os.path.join(tmp, "fig.json")
            proc = subprocess.run([sys.executable, score.__file__, "--analyze", oracle,
                                   "--windows", "6", "--sizes", "small", "--seed", "o1",
                                   "--json", out], capture_output=True, text=True,
                                  timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(out) as fh:
                fig = json.load(fh)["overall"]
            self.assertEqual(fig["errors"], 0)
            self.assertIn(fig["precision"], (1.0, None))
            self.assertIn(fig["recall"], (1.0, None))
            self.assertEqual(fig["healthy_flagged"] or 0.0, 0.0)

    def test_poisson_tail(self):
        # Against the sums written out: P(X >= 2 | 0.18), P(X >= 1 | 0.5).
        self.assertAlmostEqual(oracle.upper_tail(2, 0.18), 1 - 1.18 * 2.718281828459045 ** -0.18,
                               places=12)
        self.assertAlmostEqual(oracle.upper_tail(1, 0.5), 1 - 2.718281828459045 ** -0.5,
                               places=12)
        self.assertEqual(oracle.upper_tail(0, 3.0), 1.0)
        self.assertGreater(oracle.upper_tail(3, 10.0), 0.99)
        self.assertLess(oracle.upper_tail(40, 2.0), 1e-30)

    def test_oracle_sees_a_lossy_component_and_not_a_healthy_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            csv_path, _, truth = blindgen.write_window("s3", 0, "small", tmp,
                                                       only="single_loss")
            pairs, counts = score.read_window(csv_path)
            sets = score.component_sets(pairs)
            f = truth["faults"][0]
            self.assertGreaterEqual(f["loss"], 0.05)
            self.assertEqual(oracle.detectable(truth, counts, sets, frozenset(pairs)), [True])
            # A component no fault touches, claimed lossy, shows nothing.
            lossy = sets[(f["kind"], f["id"])]
            healthy = next(c for c, s in sets.items()
                           if c[0] == "node" and not s & lossy and len(s) >= 2)
            claim = dict(truth, faults=[dict(f, kind=healthy[0], id=healthy[1])])
            self.assertEqual(oracle.detectable(claim, counts, sets, frozenset(pairs)), [False])
            # The family-wise bar is the 1 % spread over the components.
            self.assertAlmostEqual(oracle.family_level(sets), 0.01 / len(sets))
            sc = score.score_window(truth, csv_path, {"faults": []})
            self.assertEqual((sc["detectable"], sc["detectable_fw"]), ([True], [True]))

    def test_bad_flags_exit_2(self):
        for argv in (["--windows", "5"], ["--analyze", "/nonexistent/bin"],
                     ["--analyze", sys.executable, "--windows", "0"],
                     ["--analyze", sys.executable, "--sizes", "huge"],
                     ["--analyze", sys.executable, "--only", "nothing_such"]):
            proc = subprocess.run([sys.executable, score.__file__] + argv,
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 2, argv)
            self.assertIn("error", proc.stderr)


if __name__ == "__main__":
    unittest.main()
