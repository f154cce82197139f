//! Built-in workloads standing in for the NAS Parallel Benchmarks kernels of paper
//! 002 (EP, CG) and for its 20-minute sleep. Like NPB, each times its own solve
//! and reports it: process start-up, allocation and problem generation are outside
//! the timed region, so the figure compared between monitors is the work itself.
//!
//! | kernel | stands in for | bound by | `size` means |
//! |---|---|---|---|
//! | [`Kind::Ep`] | NPB EP ("embarrassingly parallel") | floating point (sqrt, ln) | Gaussian pairs tried |
//! | [`Kind::Cg`] | NPB CG (conjugate gradient) | memory (sparse matrix-vector products) | matrix rows |
//! | [`Kind::Idle`] | the paper's sleep runs | nothing (the CPU idles) | milliseconds |
//!
//! Results do not depend on the thread count (EP exactly; CG to rounding), so a
//! run checks itself: the `check` figure of a run is comparable across runs.

use quietwatt_stats::rng::XorShift;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Pairs per EP block: the unit of work handed to a thread, with its own seed, so
/// that the sums do not depend on how blocks are spread over threads.
const EP_BLOCK: u64 = 1 << 16;
/// Off-diagonal entries per row of the CG matrix (NPB CG has ~ 11 to 15).
const CG_NONZEROS_PER_ROW: usize = 12;
/// CG iterations per solve: a fixed amount of work, as NPB's 25 per outer step.
pub const CG_ITERATIONS: usize = 75;

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Gaussian pairs by the Marsaglia polar method (compute-bound).
    Ep,
    /// Conjugate gradient on a generated sparse SPD matrix (memory-bound).
    Cg,
    /// A sleep (idle CPU).
    Idle,
}

impl Kind {
    /// Every kernel.
    pub const ALL: [Kind; 3] = [Kind::Ep, Kind::Cg, Kind::Idle];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ep => "ep",
            Kind::Cg => "cg",
            Kind::Idle => "idle",
        }
    }

    /// A default size that runs for about a second on one core of a 2020s CPU.
    pub fn default_size(self) -> u64 {
        match self {
            Kind::Ep => 1 << 26,
            Kind::Cg => 400_000,
            Kind::Idle => 1000,
        }
    }

    /// What `size` counts, for messages.
    pub fn size_unit(self) -> &'static str {
        match self {
            Kind::Ep => "pairs",
            Kind::Cg => "rows",
            Kind::Idle => "ms",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a built-in workload.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown workload '{0}': expected ep, cg or idle")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Kind, UnknownKind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// A workload and its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Spec {
    /// The kernel.
    pub kind: Kind,
    /// Its size (see [`Kind`]).
    pub size: u64,
    /// Threads that share the work.
    pub threads: usize,
}

/// Why a workload could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// A size or thread count that cannot work.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// The setting.
        what: &'static str,
        /// Why.
        why: String,
    },
    /// The problem does not fit in memory.
    #[error("a {kind} problem of size {size} needs about {bytes} bytes, more than this machine can allocate")]
    TooLarge {
        /// The kernel.
        kind: Kind,
        /// The size asked.
        size: u64,
        /// Bytes it needs.
        bytes: u128,
    },
}

/// What a solve did and how long it took.
#[derive(Debug, Clone, Serialize)]
pub struct Solved {
    /// What ran.
    pub spec: Spec,
    /// Seconds of the timed solve only.
    pub solve_s: f64,
    /// Seconds spent generating the problem (not timed in `solve_s`).
    pub setup_s: f64,
    /// A figure that depends only on the problem, to compare runs: EP: accepted
    /// pairs; CG: the final relative residual; idle: the milliseconds slept.
    pub check: f64,
    /// A line on what was computed, for people.
    pub detail: String,
}

/// Generates the problem, then runs and times the solve.
pub fn run(spec: Spec) -> Result<Solved, WorkloadError> {
    if spec.size == 0 {
        return Err(WorkloadError::Invalid {
            what: "size",
            why: format!(
                "a {} workload needs at least 1 {}",
                spec.kind,
                spec.kind.size_unit()
            ),
        });
    }
    if spec.threads == 0 || spec.threads > 1024 {
        return Err(WorkloadError::Invalid {
            what: "thread count",
            why: format!("{} (give 1 to 1024)", spec.threads),
        });
    }
    match spec.kind {
        Kind::Ep => Ok(ep(spec)),
        Kind::Cg => cg(spec),
        Kind::Idle => Ok(idle(spec)),
    }
}

// ---------------------------------------------------------------------------
// EP.

/// One block's tallies.
#[derive(Debug, Clone, Copy, Default)]
struct EpTally {
    accepted: u64,
    sx: f64,
    sy: f64,
    /// Pairs by annulus: max(|X|, |Y|) in [l, l+1).
    annuli: [u64; 10],
}

fn ep_block(block: u64, len: u64) -> EpTally {
    // splitmix-style scramble of the block index: neighbouring blocks get
    // unrelated streams.
    let mut z = block.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let mut rng = XorShift::new(z ^ (z >> 31));
    let mut t = EpTally::default();
    for _ in 0..len {
        let x = 2.0 * rng.unit() - 1.0;
        let y = 2.0 * rng.unit() - 1.0;
        let r2 = x * x + y * y;
        // Marsaglia's polar method: a point in the unit disc gives two independent
        // standard normal deviates.
        if r2 <= 1.0 && r2 > 0.0 {
            let f = (-2.0 * r2.ln() / r2).sqrt();
            let (gx, gy) = (x * f, y * f);
            let l = gx.abs().max(gy.abs()) as usize;
            if l < t.annuli.len() {
                t.annuli[l] += 1;
            }
            t.sx += gx;
            t.sy += gy;
            t.accepted += 1;
        }
    }
    t
}

fn ep(spec: Spec) -> Solved {
    let blocks = spec.size.div_ceil(EP_BLOCK);
    let len = |b: u64| EP_BLOCK.min(spec.size - b * EP_BLOCK);
    let threads = (spec.threads as u64).min(blocks).max(1);
    let start = Instant::now();
    // Thread i takes blocks i, i + T, ...: equal shares without a shared counter.
    let mut tallies: Vec<(u64, EpTally)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                s.spawn(move || {
                    (i..blocks)
                        .step_by(threads as usize)
                        .map(|b| (b, ep_block(b, len(b))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let solve_s = start.elapsed().as_secs_f64();
    // Summed in block order: the same floating-point result for any thread count.
    tallies.sort_by_key(|(b, _)| *b);
    let mut total = EpTally::default();
    for (_, t) in &tallies {
        total.accepted += t.accepted;
        total.sx += t.sx;
        total.sy += t.sy;
        for (a, b) in total.annuli.iter_mut().zip(&t.annuli) {
            *a += b;
        }
    }
    Solved {
        spec,
        solve_s,
        setup_s: 0.0,
        check: total.accepted as f64,
        detail: format!(
            "{} of {} pairs accepted ({:.5}, pi/4 = 0.78540), sum X = {:.6e}, sum Y = {:.6e}, annuli {:?}",
            total.accepted,
            spec.size,
            total.accepted as f64 / spec.size as f64,
            total.sx,
            total.sy,
            &total.annuli[..4]
        ),
    }
}

// ---------------------------------------------------------------------------
// CG.

/// A symmetric sparse matrix in compressed sparse row form.
struct Csr {
    row_start: Vec<usize>,
    col: Vec<u32>,
    val: Vec<f64>,
}

/// A random sparse symmetric matrix, strictly diagonally dominant with a positive
/// diagonal, hence positive definite. The off-diagonal entries link each row with
/// rows anywhere in the matrix, so the products stream memory with poor locality,
/// as NPB CG's do.
fn cg_matrix(n: usize) -> Csr {
    let mut rng = XorShift::new(0xC6_2024);
    let half = CG_NONZEROS_PER_ROW / 2;
    // Each row draws `half` partners; the mirror entries make it symmetric.
    let mut entries: Vec<(u32, u32, f64)> = Vec::with_capacity(n * half * 2);
    for i in 0..n {
        for _ in 0..half {
            let j = rng.below(n);
            if j != i {
                let v = -rng.unit();
                entries.push((i as u32, j as u32, v));
                entries.push((j as u32, i as u32, v));
            }
        }
    }
    entries.sort_unstable_by_key(|&(i, j, _)| (i, j));
    let mut diag = vec![0.0f64; n];
    for &(i, _, v) in &entries {
        diag[i as usize] += v.abs();
    }
    let mut row_start = Vec::with_capacity(n + 1);
    let mut col = Vec::with_capacity(entries.len() + n);
    let mut val = Vec::with_capacity(entries.len() + n);
    let mut k = 0;
    for (i, d) in diag.iter().enumerate() {
        row_start.push(col.len());
        // Dominance margin 10 %: well enough conditioned to converge in 75 steps,
        // not so well that the work ends early.
        col.push(i as u32);
        val.push(d * 1.1 + 1e-3);
        while k < entries.len() && entries[k].0 as usize == i {
            col.push(entries[k].1);
            val.push(entries[k].2);
            k += 1;
        }
    }
    row_start.push(col.len());
    Csr {
        row_start,
        col,
        val,
    }
}

/// Splits `0..n` into `t` contiguous ranges.
fn chunks(n: usize, t: usize) -> Vec<std::ops::Range<usize>> {
    let per = n.div_ceil(t.max(1));
    (0..n)
        .step_by(per.max(1))
        .map(|s| s..(s + per).min(n))
        .collect()
}

/// Runs `f` on each chunk of `0..n` in parallel (inline for one chunk) with the
/// chunk's slice of `out`, and returns the sum of what the calls return.
fn par_sum(
    n: usize,
    threads: usize,
    out: &mut [f64],
    f: impl Fn(std::ops::Range<usize>, &mut [f64]) -> f64 + Sync,
) -> f64 {
    let ranges = chunks(n, threads);
    if ranges.len() <= 1 {
        return f(0..n, out);
    }
    std::thread::scope(|s| {
        let mut rest = out;
        let mut handles = Vec::with_capacity(ranges.len());
        for r in ranges {
            let (mine, tail) = rest.split_at_mut(r.len());
            rest = tail;
            let f = &f;
            handles.push(s.spawn(move || f(r, mine)));
        }
        handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    })
}

/// Bytes one CG row needs at the peak of generation: the sorted entry list
/// (16 B per entry), the matrix (12 B per nonzero) and six vectors.
const CG_BYTES_PER_ROW: u128 = (CG_NONZEROS_PER_ROW as u128) * (16 + 12) + 12 + 6 * 8;

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn cg(spec: Spec) -> Result<Solved, WorkloadError> {
    let bytes = spec.size as u128 * CG_BYTES_PER_ROW;
    let too_large = WorkloadError::TooLarge {
        kind: Kind::Cg,
        size: spec.size,
        bytes,
    };
    // An allocation that fails aborts the process: refuse what cannot fit first.
    if mem_available().is_some_and(|avail| bytes > avail) {
        return Err(too_large);
    }
    let n = usize::try_from(spec.size)
        .ok()
        .filter(|&n| n <= u32::MAX as usize)
        .ok_or(too_large)?;
    let setup = Instant::now();
    let a = cg_matrix(n);
    // b = A * ones: the exact solution is all ones, so the error is checkable.
    let mut b = vec![0.0f64; n];
    for (i, bi) in b.iter_mut().enumerate() {
        *bi = (a.row_start[i]..a.row_start[i + 1]).map(|k| a.val[k]).sum();
    }
    let mut x = vec![0.0f64; n];
    let mut r = b.clone();
    let mut p = b.clone();
    let mut q = vec![0.0f64; n];
    let setup_s = setup.elapsed().as_secs_f64();
    let t = spec.threads;

    let start = Instant::now();
    let mut rr: f64 = r.iter().map(|v| v * v).sum();
    for _ in 0..CG_ITERATIONS {
        if rr == 0.0 {
            break;
        }
        // q = A p, and p.q in the same pass.
        let pq = {
            let (a, p) = (&a, &p);
            par_sum(n, t, &mut q, |range, q| {
                let mut dot = 0.0;
                for (qi, i) in q.iter_mut().zip(range) {
                    let mut s = 0.0;
                    for k in a.row_start[i]..a.row_start[i + 1] {
                        s += a.val[k] * p[a.col[k] as usize];
                    }
                    *qi = s;
                    dot += p[i] * s;
                }
                dot
            })
        };
        let alpha = rr / pq;
        // x += alpha p (x is only written here: no need to go parallel for it).
        for (xi, pi) in x.iter_mut().zip(&p) {
            *xi += alpha * pi;
        }
        // r -= alpha q, and r.r in the same pass.
        let rr_new = {
            let q = &q;
            par_sum(n, t, &mut r, |range, r| {
                let mut dot = 0.0;
                for (ri, i) in r.iter_mut().zip(range) {
                    *ri -= alpha * q[i];
                    dot += *ri * *ri;
                }
                dot
            })
        };
        let beta = rr_new / rr;
        rr = rr_new;
        {
            let r = &r;
            par_sum(n, t, &mut p, |range, p| {
                for (pi, i) in p.iter_mut().zip(range) {
                    *pi = r[i] + beta * *pi;
                }
                0.0
            });
        }
    }
    let solve_s = start.elapsed().as_secs_f64();
    let bnorm = b.iter().map(|v| v * v).sum::<f64>().sqrt();
    let rel = rr.sqrt() / bnorm.max(f64::MIN_POSITIVE);
    let max_err = x.iter().map(|v| (v - 1.0).abs()).fold(0.0, f64::max);
    Ok(Solved {
        spec,
        solve_s,
        setup_s,
        check: rel,
        detail: format!(
            "{n} rows, {} nonzeros, {CG_ITERATIONS} iterations: relative residual {rel:.3e}, max |x - 1| = {max_err:.3e}",
            a.val.len()
        ),
    })
}

// ---------------------------------------------------------------------------
// Idle.

fn idle(spec: Spec) -> Solved {
    let asked = Duration::from_millis(spec.size);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..spec.threads {
            s.spawn(move || std::thread::sleep(asked));
        }
    });
    let solve_s = start.elapsed().as_secs_f64();
    Solved {
        spec,
        solve_s,
        setup_s: 0.0,
        check: spec.size as f64,
        detail: format!("slept {} ms on {} thread(s)", spec.size, spec.threads),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: Kind, size: u64, threads: usize) -> Spec {
        Spec {
            kind,
            size,
            threads,
        }
    }

    #[test]
    fn ep_gives_the_same_result_on_any_thread_count() {
        let one = run(spec(Kind::Ep, 300_000, 1)).unwrap();
        let two = run(spec(Kind::Ep, 300_000, 2)).unwrap();
        let three = run(spec(Kind::Ep, 300_000, 3)).unwrap();
        assert_eq!(one.detail, two.detail);
        assert_eq!(one.detail, three.detail);
        // The accepted fraction is pi/4 to within sampling error (sd ~ 0.00075).
        let frac = one.check / 300_000.0;
        assert!((frac - std::f64::consts::FRAC_PI_4).abs() < 0.005, "{frac}");
    }

    #[test]
    fn cg_converges_to_the_known_solution_on_any_thread_count() {
        for t in [1, 2, 3] {
            let s = run(spec(Kind::Cg, 5_000, t)).unwrap();
            assert!(s.check < 1e-8, "{t} threads: {}", s.detail);
        }
    }

    #[test]
    fn idle_sleeps_at_least_what_it_was_asked() {
        let s = run(spec(Kind::Idle, 20, 2)).unwrap();
        assert!(s.solve_s >= 0.020, "{s:?}");
    }

    #[test]
    fn zero_sizes_and_threads_are_refused_and_names_parse() {
        assert!(run(spec(Kind::Ep, 0, 1)).is_err());
        assert!(run(spec(Kind::Cg, 10, 0)).is_err());
        assert_eq!("CG".parse::<Kind>().unwrap(), Kind::Cg);
        assert!("bt".parse::<Kind>().is_err());
        assert_eq!(chunks(10, 3), vec![0..4, 4..8, 8..10]);
        assert_eq!(chunks(2, 4), vec![0..1, 1..2]);
    }
}
