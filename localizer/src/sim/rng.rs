//! Small, fast, reproducible randomness for the simulator (SplitMix64) and
//! the hashed ids of simulated components. Changing anything here changes
//! every benchmark figure.

/// Small, fast, reproducible RNG (SplitMix64); the simulator needs no
/// cryptographic quality and no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    /// Next raw value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        unit(self.next_u64())
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.f64() * n as f64) as usize % n.max(1)
    }
    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.f64().max(1e-300);
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Binomial(n, p) by geometric skipping (fast for the small p of loss).
    pub fn binomial(&mut self, n: u32, p: f64) -> u32 {
        if p <= 0.0 {
            return 0;
        }
        if p >= 1.0 {
            return n;
        }
        if p > 0.5 {
            return n - self.binomial(n, 1.0 - p);
        }
        let lq = (1.0 - p).ln();
        let (mut count, mut pos) = (0u32, 0f64);
        loop {
            let u = self.f64().max(1e-300);
            pos += (u.ln() / lq).floor() + 1.0;
            if pos > n as f64 {
                return count;
            }
            count += 1;
        }
    }
}

pub(super) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `h`'s top 53 bits as a number in [0, 1): a draw decided by a hash
/// instead of the generator, so it takes nothing from the draw order.
pub(super) fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

pub(super) fn hash_str(s: &str) -> u64 {
    s.bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| mix(h ^ b as u64))
}

/// A 32-hex-digit id, like the hashed ids of the production sample.
pub(super) fn hashed(name: &str) -> String {
    let h = hash_str(name);
    format!("{:016x}{:016x}", h, mix(h ^ 0x5555))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_sampler_has_right_mean() {
        let mut rng = Rng::new(3);
        let n = 20000;
        let total: u32 = (0..n).map(|_| rng.binomial(100, 0.03)).sum();
        let mean = total as f64 / n as f64;
        assert!((mean - 3.0).abs() < 0.1, "mean {mean}");
        let total: u32 = (0..n).map(|_| rng.binomial(100, 0.9)).sum();
        assert!((total as f64 / n as f64 - 90.0).abs() < 0.2);
    }
}
