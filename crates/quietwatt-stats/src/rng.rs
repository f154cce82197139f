//! A tiny seeded pseudo-random generator, shared by whatever needs reproducible
//! randomness (the lab's bootstrap and round shuffles, the model's synthetic
//! sweeps, the event tests): it lives here, not in one of its users, so that no
//! module borrows it sideways from another.

/// A tiny xorshift64* generator (Vigna 2016): enough for bootstrap indices, and
/// no dependency.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is replaced: xorshift would stay at 0).
    pub fn new(seed: u64) -> XorShift {
        XorShift(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`), by Lemire's multiply-shift (bias below 2^-32
    /// for any n a sample has).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// A number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_is_deterministic_and_in_range() {
        let mut a = XorShift::new(42);
        let mut b = XorShift::new(42);
        for _ in 0..1000 {
            let x = a.below(7);
            assert_eq!(x, b.below(7));
            assert!(x < 7);
            let u = a.unit();
            b.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_ne!(XorShift::new(0).next_u64(), 0);
    }
}
