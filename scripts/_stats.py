"""Statistics the benchmark scripts share (scripts/*-cost.py)."""

import statistics


def median_ci(xs, rng, n=2000):
    """The median and a 95 % percentile-bootstrap interval of it."""
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return statistics.median(xs), meds[int(0.025 * n)], meds[int(0.975 * n) - 1]
