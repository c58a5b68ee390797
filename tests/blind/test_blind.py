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
