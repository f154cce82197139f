//! quietwatt-stats against the reference values in `tests/vectors/stats.json`, made by
//! `tests/vectors/make_stats_vectors.py` with SciPy, statsmodels and NumPy (see
//! the script for how to run it). No Python is needed here.

use quietwatt_stats::{
    hodges_lehmann, holm, mann_whitney_u, mann_whitney_u_any_size, remove_outliers, Alternative,
    Computed, Method, StatsError, IQR_FACTOR, MIN_SAMPLES,
};
use serde_json::Value;

fn vectors() -> Value {
    let text = include_str!("vectors/stats.json");
    serde_json::from_str(text).expect("stats.json parses")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

/// Equal to a relative 1e-9 (the normal tail of libm against SciPy's cephes), or
/// an absolute 1e-14 near zero.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-14 + 1e-9 * b.abs()
}

fn alternative(s: &str) -> Alternative {
    match s {
        "greater" => Alternative::Greater,
        "less" => Alternative::Less,
        "two-sided" => Alternative::TwoSided,
        other => panic!("alternative {other}"),
    }
}

fn method(s: &str) -> Method {
    match s {
        "auto" => Method::Auto,
        "exact" => Method::Exact,
        "asymptotic" => Method::Asymptotic,
        other => panic!("method {other}"),
    }
}

fn computed(s: &str) -> Computed {
    match s {
        "exact" => Computed::Exact,
        "asymptotic" => Computed::Asymptotic,
        other => panic!("chosen {other}"),
    }
}

#[test]
fn the_vectors_cover_what_the_issue_asks() {
    let v = vectors();
    assert_eq!(v["min_samples"].as_u64(), Some(MIN_SAMPLES as u64));
    let cases = v["mannwhitneyu"].as_array().expect("cases");
    let names: Vec<&str> = cases.iter().filter_map(|c| c["name"].as_str()).collect();
    for want in [
        "n=1 each",
        "n=2 each",
        "n=3 each",
        "identical samples",
        "all tied",
        "ties",
    ] {
        assert!(
            names.iter().any(|n| n.contains(want)),
            "no case named like {want:?}"
        );
    }
    assert!(cases.iter().any(|c| c["chosen"] == "exact"));
    assert!(cases.iter().any(|c| c["chosen"] == "asymptotic"));
}

#[test]
fn mann_whitney_matches_scipy() {
    let v = vectors();
    let mut checked = 0;
    for c in v["mannwhitneyu"].as_array().expect("cases") {
        let (x, y) = (floats(&c["x"]), floats(&c["y"]));
        let (alt, m) = (
            alternative(c["alternative"].as_str().expect("alt")),
            method(c["method"].as_str().expect("method")),
        );
        let what = format!("{} ({} {})", c["name"], c["alternative"], c["method"]);
        let strict = mann_whitney_u(&x, &y, alt, m);
        let any = mann_whitney_u_any_size(&x, &y, alt, m);
        match c["error"].as_str() {
            Some("all_tied") => {
                assert!(
                    matches!(
                        strict,
                        Err(StatsError::AllTied { .. }) | Err(StatsError::TooFewSamples { .. })
                    ),
                    "{what}: {strict:?}"
                );
                assert!(
                    matches!(any, Err(StatsError::AllTied { .. })),
                    "{what}: {any:?}"
                );
                // SciPy gives NaN here (or a number from a zero-variance lookup):
                // quietwatt gives a reason instead, never NaN.
                continue;
            }
            Some("too_few_samples") => {
                assert!(
                    matches!(strict, Err(StatsError::TooFewSamples { min, .. }) if min == MIN_SAMPLES),
                    "{what}: {strict:?}"
                );
            }
            None => {
                let s = strict.unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(Ok(&s), any.as_ref(), "{what}");
            }
            Some(other) => panic!("unknown error kind {other}"),
        }
        let r = any.unwrap_or_else(|e| panic!("{what}: {e}"));
        let want_u = c["statistic"].as_f64().expect("U");
        let want_p = c["pvalue"].as_f64().expect("p");
        assert_eq!(r.u, want_u, "{what}: U");
        assert!(
            close(r.p_value, want_p),
            "{what}: p {} vs SciPy {want_p}",
            r.p_value
        );
        assert_eq!(
            r.method,
            computed(c["chosen"].as_str().expect("chosen")),
            "{what}: method"
        );
        assert!(r.p_value.is_finite() && (0.0..=1.0).contains(&r.p_value));
        checked += 1;
    }
    assert!(checked > 150, "only {checked} cases checked");
}

#[test]
fn holm_matches_statsmodels() {
    let v = vectors();
    for c in v["holm"].as_array().expect("families") {
        let p = floats(&c["p"]);
        let want = floats(&c["adjusted"]);
        let got = holm(&p).expect("valid p-values");
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(close(*g, *w), "family {p:?}, [{i}]: {g} vs {w}");
        }
    }
}

#[test]
fn iqr_outliers_match_numpy_quantiles() {
    let v = vectors();
    for c in v["iqr"].as_array().expect("samples") {
        let values = floats(&c["values"]);
        let o = remove_outliers(&values, IQR_FACTOR).expect("finite");
        let fences = o.fences.expect("non-empty");
        for (got, key) in [
            (fences.q1, "q1"),
            (fences.q3, "q3"),
            (fences.low, "low"),
            (fences.high, "high"),
        ] {
            let want = c[key].as_f64().expect("number");
            assert!(close(got, want), "{values:?}: {key} {got} vs {want}");
        }
        assert_eq!(o.kept, floats(&c["kept"]), "{values:?}");
        assert_eq!(o.kept.len() + o.removed.len(), values.len());
    }
}

#[test]
fn hodges_lehmann_matches_the_reference_intervals() {
    let v = vectors();
    for c in v["hodges_lehmann"].as_array().expect("shifts") {
        let (x, y) = (floats(&c["x"]), floats(&c["y"]));
        let what = c["name"].to_string();
        let s = hodges_lehmann(
            &x,
            &y,
            c["confidence"].as_f64().expect("conf"),
            method(c["method"].as_str().expect("method")),
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            s.method,
            computed(c["chosen"].as_str().expect("chosen")),
            "{what}"
        );
        for (got, key) in [
            (s.estimate, "estimate"),
            (s.lower, "lower"),
            (s.upper, "upper"),
            (s.achieved_confidence, "achieved_confidence"),
        ] {
            let want = c[key].as_f64().expect("number");
            assert!(close(got, want), "{what}: {key} {got} vs {want}");
        }
        assert!(
            s.lower <= s.estimate && s.estimate <= s.upper,
            "{what}: {s:?}"
        );
    }
}

#[test]
fn small_samples_say_too_few_instead_of_a_shift() {
    for n in 1..MIN_SAMPLES {
        let x: Vec<f64> = (0..n).map(|i| 10.0 + i as f64).collect();
        let y: Vec<f64> = (0..8).map(|i| i as f64).collect();
        let e = hodges_lehmann(&x, &y, 0.95, Method::Auto).expect_err("too few");
        assert_eq!(
            e,
            StatsError::TooFewSamples {
                x: n,
                y: 8,
                min: MIN_SAMPLES
            }
        );
        assert!(e.to_string().contains("too few samples"), "{e}");
    }
}
