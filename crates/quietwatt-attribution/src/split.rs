//! Exact integer splitting: the largest-remainder method.
//!
//! Energy is split in whole microjoules so that the parts add up to the whole with
//! nothing lost to rounding: each part first gets the floor of its proportional
//! share, and the few microjoules left (fewer than the number of parts) go one each
//! to the parts with the largest remainders (ties: the earlier part).

/// Splits integers in proportion to weights, reusing its scratch space.
#[derive(Debug, Default, Clone)]
pub struct Splitter {
    /// (remainder, index) of each weighted part.
    scratch: Vec<(u128, usize)>,
}

impl Splitter {
    /// A splitter with no scratch space yet (it grows to the most parts seen).
    pub fn new() -> Splitter {
        Splitter::default()
    }

    /// Writes into `out[i]` the share of `total` that `weights[i]` earns, and
    /// returns what was handed out: `total` exactly when any weight is above 0, 0
    /// when every weight is 0 (then `out` is all zeros and the caller keeps `total`).
    /// `out` must be as long as `weights`; a shorter one is filled as far as it goes
    /// and the rest is not handed out.
    pub fn split(&mut self, total: u64, weights: &[u64], out: &mut [u64]) -> u64 {
        let n = weights.len().min(out.len());
        let sum: u128 = weights[..n].iter().map(|&w| u128::from(w)).sum();
        out.iter_mut().for_each(|o| *o = 0);
        if sum == 0 || total == 0 {
            return 0;
        }
        let t = u128::from(total);
        let mut given: u128 = 0;
        self.scratch.clear();
        for i in 0..n {
            let exact = t * u128::from(weights[i]);
            // The floor is at most `total`: it fits.
            let q = exact / sum;
            out[i] = q as u64;
            given += q;
            if weights[i] > 0 {
                self.scratch.push((exact % sum, i));
            }
        }
        // Fewer than n microjoules are left: one each to the largest remainders.
        let left = (t - given) as usize;
        if left > 0 {
            self.scratch
                .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            for &(_, i) in self.scratch.iter().take(left) {
                out[i] += 1;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn thirds_go_to_the_largest_remainders() {
        let mut s = Splitter::new();
        let mut out = [0; 3];
        assert_eq!(s.split(100, &[1, 1, 1], &mut out), 100);
        assert_eq!(out, [34, 33, 33]);
        assert_eq!(s.split(10, &[1, 2, 7], &mut out), 10);
        assert_eq!(out, [1, 2, 7]);
        assert_eq!(s.split(5, &[0, 0, 0], &mut out), 0);
        assert_eq!(out, [0, 0, 0]);
        assert_eq!(s.split(u64::MAX, &[u64::MAX, 1], &mut out[..2]), u64::MAX);
        assert_eq!(out[0] + out[1], u64::MAX);
    }

    proptest! {
        /// Every split adds up to the whole, each part is within one of its exact
        /// proportional share, and a zero weight gets nothing.
        #[test]
        fn parts_add_up_exactly(total in any::<u64>(), weights in prop::collection::vec(0u64..1 << 40, 1..50)) {
            let mut s = Splitter::new();
            let mut out = vec![0; weights.len()];
            let given = s.split(total, &weights, &mut out);
            let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
            let got: u128 = out.iter().map(|&o| u128::from(o)).sum();
            if sum == 0 {
                prop_assert_eq!(given, 0);
                prop_assert_eq!(got, 0);
            } else {
                prop_assert_eq!(given, total);
                prop_assert_eq!(got, u128::from(total));
            }
            for (w, o) in weights.iter().zip(&out) {
                let exact = u128::from(total) * u128::from(*w);
                let o = u128::from(*o);
                if sum > 0 {
                    prop_assert!(o * sum <= exact + sum && exact < (o + 1) * sum + sum);
                }
                if *w == 0 {
                    prop_assert_eq!(o, 0);
                }
            }
        }
    }
}
