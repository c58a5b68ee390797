"""Which true loss faults the window's probes can show at all.

Added by an author who had read the engine, after the scorer and the
generator were written; it never calls the engine and changes no score.

A fault is *detectable* when an oracle told which component to test, and
knowing every other true fault's rate, finds its flows losing more than
those rates and the window's background explain: a one-sided Poisson test
of the probes lost on its observed flows, at p < `LEVEL`, with no
correction for the many components a real engine must test. It is
*detectable family-wise* at p < `FAMILY_ALPHA` / (components in the
window): the bar of any method that tests every component and still pages
no more than 1 % of healthy windows. A gray
container losing 2 of its 290 probes, or one whose few flows all cross a
lossy spine and lose about what the spine alone would, is not: no method
can find it in this window. Only the `loss` symptom is tested; latency and
unreachable faults count as detectable.

Recall over the detectable faults says how much of the shortfall is the
engine's; the share of detectable faults bounds the recall any engine
reaches on the same windows.
"""
import math

LEVEL = 1e-3
FAMILY_ALPHA = 1e-2


def upper_tail(k, mu):
    """P(X >= k) for X ~ Poisson(mu)."""
    if k <= 0:
        return 1.0
    if mu <= 0:
        return 0.0

    def log_term(i):
        return -mu + i * math.log(mu) - math.lgamma(i + 1)

    # Sum from the term nearest the mode outwards, relative to it, so
    # nothing overflows or underflows: above the mean the tail itself,
    # below it the complement.
    if k > mu:
        first, step, stop = k, 1, k + 100000
    else:
        first, step, stop = k - 1, -1, -1
    rel, i = 0.0, first
    while i != stop:
        t = math.exp(log_term(i) - log_term(first))
        rel += t
        if t < 1e-17:
            break
        i += step
    tail = min(math.exp(log_term(first)) * rel, 1.0)
    return tail if k > mu else 1.0 - tail


def fault_rate(f):
    """The rate a true fault takes from the flows it hits (None: latency)."""
    if f["symptom"] == "unreachable":
        return f.get("fail", 1.0)
    if f["symptom"] == "loss":
        return f.get("loss", 0.0)
    return None


def fault_flows(f, sets, observed):
    """The observed pairs a true fault acts on."""
    if f.get("hit_pairs") is not None:
        return frozenset(tuple(p) for p in f["hit_pairs"]) & observed
    return sets.get((f["kind"], f["id"]), frozenset())


def detectable(truth, counts, sets, observed):
    """Per true fault: whether the oracle finds it (see the module docs)."""
    return [p < LEVEL for p in p_values(truth, counts, sets, observed)]


def family_level(sets):
    """The family-wise bar of a window whose components are `sets`."""
    return FAMILY_ALPHA / max(len(sets), 1)


def p_values(truth, counts, sets, observed):
    """Per true fault: the oracle's p-value (0 for latency and
    unreachable faults, which it does not test). `counts` maps each
    observed pair to [probes, lost] (score.read_window)."""
    faults = truth["faults"]
    flows = [fault_flows(f, sets, observed) for f in faults]
    touched = frozenset().union(*flows) if flows else frozenset()
    n0 = sum(c[0] for p, c in counts.items() if p not in touched)
    k0 = sum(c[1] for p, c in counts.items() if p not in touched)
    base = max(k0 / n0 if n0 else 1e-4, 1e-5)
    out = []
    for j, f in enumerate(faults):
        if f["symptom"] != "loss":
            out.append(0.0)
            continue
        mu = k = 0.0
        for p in flows[j]:
            n, lost = counts.get(p, (0, 0))
            survive = 1.0 - base
            for g, fg in zip(faults, flows):
                if g is not f and p in fg and fault_rate(g) is not None:
                    survive *= 1.0 - fault_rate(g)
            if survive < 1e-3:
                continue                  # another fault takes every probe
            mu += n * (1.0 - survive)
            k += lost
        out.append(upper_tail(int(k), mu))
    return out
