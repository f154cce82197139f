#!/usr/bin/env python3
"""Writes stats.json: reference values for quietwatt's statistics (quietwatt_stats), computed with
SciPy (Mann-Whitney U), statsmodels (Holm), NumPy (quantiles, Hodges-Lehmann
estimate) and an independent exact count of the U distribution (the shift's
confidence interval, R's wilcox.test(conf.int=TRUE) rule).

    python3 -m venv /tmp/v && /tmp/v/bin/pip install scipy statsmodels
    /tmp/v/bin/python crates/quietwatt-stats/tests/vectors/make_stats_vectors.py

The Rust test (tests/stats.rs) reads the committed JSON; it needs no Python.
Every case is deterministic (fixed seeds), so re-running gives the same file for
the same library versions (recorded in the file).
"""
import json
import math
import os
from functools import lru_cache

import numpy as np
import scipy
import scipy.stats as st
import statsmodels
from statsmodels.stats.multitest import multipletests

MIN_SAMPLES = 4  # quietwatt_stats::MIN_SAMPLES


def f(v):
    """A float for JSON, None for NaN (SciPy's answer where Rust gives an error)."""
    v = float(v)
    return None if math.isnan(v) else v


def rng(seed):
    return np.random.default_rng(seed)


def has_ties(x, y):
    a = np.concatenate([x, y])
    return len(np.unique(a)) < len(a)


# ---------------------------------------------------------------------------
# Mann-Whitney U

def mwu_cases():
    r = rng(6)
    cases = [
        ("n=1 each", [3.0], [1.0]),
        ("n=1 and 2", [2.5], [1.0, 3.0]),
        ("n=2 each", [5.0, 6.0], [1.0, 2.0]),
        ("n=3 each", [5.0, 6.0, 7.0], [1.0, 2.0, 3.0]),
        ("n=3 and 4", [1.2, 3.4, 2.2], [0.5, 1.0, 2.0, 4.0]),
        ("n=4 each, separated", [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0]),
        ("n=5 and 6, mixed", [1.1, 2.7, 3.3, 5.2, 4.1], [0.9, 2.1, 3.0, 1.7, 2.2, 4.4]),
        ("n=8 each, separated", list(range(9, 17)), list(range(1, 9))),
        ("n=8 each, reversed", list(range(1, 9)), list(range(9, 17))),
        ("identical samples", [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0]),
        ("identical samples, n=9", list(map(float, range(9))), list(map(float, range(9)))),
        ("all tied", [2.0] * 5, [2.0] * 6),
        ("all tied, n=1", [2.0], [2.0]),
        ("ties within groups only", [2.0, 2.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0]),
        ("ties across groups, small", [1.0, 2.0, 2.0, 3.0, 4.0], [2.0, 3.0, 3.0, 1.0]),
        ("rounded run times with ties",
         [60.12, 60.15, 60.15, 60.20, 60.31, 60.18, 60.15, 60.22, 60.40, 60.19],
         [60.10, 60.11, 60.15, 60.09, 60.12, 60.14, 60.10, 60.20, 60.13, 60.11, 60.12]),
    ]
    # Continuous random samples: no ties.
    for (seed, n1, n2, shift) in [(1, 5, 40, 0.5), (2, 9, 9, 0.3), (3, 20, 25, 0.4),
                                   (4, 30, 30, 2.0), (5, 12, 7, 0.0), (7, 50, 60, 0.1),
                                   (8, 8, 100, 0.8), (9, 40, 40, 4.0)]:
        g = rng(seed)
        x = (g.normal(10.0, 1.0, n1) + shift).round(12)
        y = g.normal(10.0, 1.0, n2).round(12)
        cases.append((f"normal seed {seed}, n={n1},{n2}, shift {shift}", list(x), list(y)))
    # Discrete random samples: many ties.
    for (seed, n1, n2) in [(11, 15, 15), (12, 6, 7), (13, 40, 35)]:
        g = rng(seed)
        cases.append((f"integers seed {seed}, n={n1},{n2}",
                      list(map(float, g.integers(0, 6, n1) + 1)),
                      list(map(float, g.integers(0, 6, n2)))))
    del r
    out = []
    for name, x, y in cases:
        x = [float(v) for v in x]
        y = [float(v) for v in y]
        for alternative in ("greater", "less", "two-sided"):
            for method in ("auto", "exact", "asymptotic"):
                ties = has_ties(np.array(x), np.array(y))
                all_tied = len(set(x + y)) == 1
                if method == "auto":
                    chosen = "asymptotic" if (len(x) > 8 and len(y) > 8) or ties else "exact"
                else:
                    chosen = method
                res = st.mannwhitneyu(x, y, alternative=alternative, method=method,
                                      use_continuity=True)
                if all_tied:
                    error = "all_tied"
                elif min(len(x), len(y)) < MIN_SAMPLES:
                    error = "too_few_samples"
                else:
                    error = None
                out.append({
                    "name": name, "x": x, "y": y,
                    "alternative": alternative, "method": method,
                    "chosen": chosen,
                    "statistic": f(res.statistic),
                    "pvalue": f(res.pvalue),
                    # What quietwatt_stats::mann_whitney_u returns instead of a p-value
                    # (any_size still gives SciPy's value when it is not all_tied).
                    "error": error,
                })
    return out


# ---------------------------------------------------------------------------
# Holm

def holm_cases():
    fams = [
        [0.01],
        [0.04, 0.01],
        [0.01, 0.01, 0.01],
        [0.01, 0.02, 0.03, 0.04, 0.05],
        [0.5, 0.001, 0.04, 0.3, 0.02, 0.9],
        [0.2, 0.2, 0.05, 1.0, 0.0],
        [0.3, 0.6, 0.9],
        list(rng(21).uniform(0, 0.2, 20)),
        list(rng(22).uniform(0, 1, 60)),
    ]
    return [{"p": [float(v) for v in p],
             "adjusted": [float(v) for v in multipletests(p, method="holm")[1]]}
            for p in fams]


# ---------------------------------------------------------------------------
# IQR outliers, factor 3

def iqr_cases():
    vals = [
        [1.0],
        [1.0, 2.0],
        [3.0, 1.0, 2.0],
        [10.0, 10.1, 10.2, 9.9, 10.0, 100.0],
        [10.0, 10.1, 10.2, 9.9, 10.0, 10.05, -50.0, 10.3],
        [5.0] * 7,
        [5.0] * 6 + [5.1],
        list(rng(31).normal(60, 0.5, 40)) + [75.0, 45.0, 61.0],
        list(rng(32).standard_cauchy(50)),
    ]
    out = []
    for v in vals:
        a = np.array(v, dtype=float)
        q1, q3 = np.percentile(a, [25, 75])  # linear: R type 7
        lo, hi = q1 - 3 * (q3 - q1), q3 + 3 * (q3 - q1)
        kept = [float(x) for x in a if lo <= x <= hi]
        out.append({"values": [float(x) for x in v], "q1": float(q1), "q3": float(q3),
                    "low": float(lo), "high": float(hi), "kept": kept})
    return out


# ---------------------------------------------------------------------------
# Hodges-Lehmann shift and its interval

@lru_cache(maxsize=None)
def u_counts(m, n):
    """Number of arrangements with U = k, k = 0..m*n, by the textbook recursion
    f(k; m, n) = f(k - n; m - 1, n) + f(k; m, n - 1) (the last of the m+n ordered
    values is an x, which beats all n y's, or a y): exact integers, independent of
    the Gaussian-binomial product the Rust code uses."""
    if m == 0 or n == 0:
        return (1,) + (0,) * (m * n)
    a = u_counts(m - 1, n)
    b = u_counts(m, n - 1)
    out = [0] * (m * n + 1)
    for k in range(m * n + 1):
        if 0 <= k - n < len(a):
            out[k] += a[k - n]
        if k < len(b):
            out[k] += b[k]
    return tuple(out)


def qwilcox(p, m, n):
    c = u_counts(m, n)
    total = sum(c)
    acc = 0
    for q, v in enumerate(c):
        acc += v
        if acc / total >= p:
            return q, c, total
    return m * n, c, total


def hl_case(name, x, y, conf=0.95, method="auto"):
    x = np.array(x, dtype=float)
    y = np.array(y, dtype=float)
    m, n = len(x), len(y)
    d = np.sort(np.subtract.outer(x, y).ravel())
    N = len(d)
    est = float(np.median(d))
    ties = has_ties(x, y)
    if method == "auto":
        chosen = "asymptotic" if (m > 8 and n > 8) or ties else "exact"
    else:
        chosen = method
    alpha = 1 - conf
    if chosen == "exact":
        qu, c, total = qwilcox(alpha / 2, m, n)
        if qu == 0:
            qu = 1
        achieved = 1 - 2 * sum(c[:qu]) / total
    else:
        mu = N / 2
        sigma = math.sqrt(N * (m + n + 1) / 12)
        z = st.norm.ppf(1 - alpha / 2)
        qu = max(1, math.ceil(mu - 0.5 - z * sigma))
        achieved = 1 - 2 * st.norm.cdf((qu - 1 + 0.5 - mu) / sigma)
    return {"name": name, "x": list(map(float, x)), "y": list(map(float, y)),
            "confidence": conf, "method": method, "chosen": chosen,
            "estimate": est, "lower": float(d[qu - 1]), "upper": float(d[N - qu]),
            "k": qu, "achieved_confidence": float(achieved)}


def hl_cases():
    out = [
        hl_case("n=4 each", [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.5]),
        hl_case("n=5 and 6", [1.1, 2.7, 3.3, 5.2, 4.1], [0.9, 2.1, 3.0, 1.7, 2.2, 4.4]),
        hl_case("identical samples", [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0]),
        hl_case("ties", [1.0, 2.0, 2.0, 3.0, 4.0], [2.0, 3.0, 3.0, 1.0]),
        hl_case("90 %", [1.1, 2.7, 3.3, 5.2, 4.1, 3.9, 2.8],
                [0.9, 2.1, 3.0, 1.7, 2.2, 4.4, 1.0, 1.5], conf=0.90),
    ]
    for (seed, n1, n2, shift, method) in [(41, 8, 8, 1.0, "auto"), (42, 7, 12, 0.5, "auto"),
                                           (43, 20, 20, 0.7, "auto"), (44, 10, 10, 1.5, "exact"),
                                           (45, 30, 25, 0.2, "auto"), (46, 6, 6, 0.0, "asymptotic")]:
        g = rng(seed)
        x = (g.normal(10.0, 1.0, n1) + shift).round(12)
        y = g.normal(10.0, 1.0, n2).round(12)
        out.append(hl_case(f"normal seed {seed}, n={n1},{n2}, shift {shift}", x, y, method=method))
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    doc = {
        "generated_by": "make_stats_vectors.py",
        "versions": {"scipy": scipy.__version__, "statsmodels": statsmodels.__version__,
                     "numpy": np.__version__},
        "min_samples": MIN_SAMPLES,
        "mannwhitneyu": mwu_cases(),
        "holm": holm_cases(),
        "iqr": iqr_cases(),
        "hodges_lehmann": hl_cases(),
    }
    path = os.path.join(here, "stats.json")
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1, allow_nan=False)
        fh.write("\n")
    print(f"wrote {path}: {len(doc['mannwhitneyu'])} U tests, {len(doc['holm'])} Holm families, "
          f"{len(doc['iqr'])} IQR samples, {len(doc['hodges_lehmann'])} shifts")


if __name__ == "__main__":
    main()
