//! NIC clock arithmetic: wrap-around of hardware CQE timestamps and their
//! conversion to wall time.
//!
//! An RNIC stamps completions with a free-running counter of its own core
//! clock. Only the low bits are valid (`completion_timestamp_mask` from
//! `ibv_query_device_ex`), so the counter wraps — after hours on a 64-bit
//! mask, after seconds on a narrow one. The counter ticks at
//! `hca_core_clock` kHz, which is nominal; the true rate drifts a little.
//! We therefore keep a [`ClockSync`]: pairs of (raw counter, wall time)
//! read with `ibv_query_rt_values_ex`, refreshed periodically, from which any
//! nearby CQE timestamp converts to nanoseconds of wall time. Everything
//! here is pure so it is tested without a device.

/// Nanoseconds per second.
const NS_PER_S: u128 = 1_000_000_000;

/// The cycles elapsed from `earlier` to `later` on a counter whose valid
/// bits are `mask` (a low-bits mask such as `0xffff_ffff_ffff`), correct
/// across one wrap-around.
pub fn wrapping_delta(later: u64, earlier: u64, mask: u64) -> u64 {
    later.wrapping_sub(earlier) & mask
}

/// The signed distance from `reference` to `ts` on a masked counter: a
/// timestamp up to half the counter's range after (or before) the reference
/// is taken as after (or before) it. Completions are always close to the
/// latest calibration, so this resolves wrap-around without ambiguity as
/// long as calibrations are much more frequent than half a wrap period.
pub fn signed_delta(ts: u64, reference: u64, mask: u64) -> i64 {
    let d = wrapping_delta(ts, reference, mask);
    let half = (mask >> 1) + 1; // half the range; mask+1 may overflow
    if d >= half {
        // Negative: the distance backwards is (mask + 1) - d.
        let back = (mask - d).saturating_add(1);
        -(back.min(i64::MAX as u64) as i64)
    } else {
        d.min(i64::MAX as u64) as i64
    }
}

pub use crate::sys::completion::valid_mask;

/// How long one wrap of the counter takes, in nanoseconds (saturating).
pub fn wrap_period_ns(mask: u64, hz: f64) -> u64 {
    if hz <= 0.0 {
        return u64::MAX;
    }
    let ns = (mask as f64 + 1.0) * 1e9 / hz;
    if ns >= u64::MAX as f64 {
        u64::MAX
    } else {
        ns as u64
    }
}

/// Convert a (signed) cycle count to nanoseconds at `hz` ticks per second.
pub fn cycles_to_ns(cycles: i64, hz: f64) -> i64 {
    if hz <= 0.0 {
        return 0;
    }
    (cycles as f64 * 1e9 / hz).round() as i64
}

/// One simultaneous reading of the NIC counter and the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Raw NIC counter (already masked).
    pub raw: u64,
    /// Wall time in ns since the epoch (midpoint of the bracketing reads).
    pub wall_ns: u64,
    /// Width of the bracket: the uncertainty of this sample.
    pub uncertainty_ns: u64,
}

/// Read the NIC counter bracketed by two wall-clock reads, `tries` times,
/// and keep the tightest bracket: a preempted read (large bracket) would
/// skew every conversion until the next calibration. `read_raw` returns
/// `None` when the device refuses (the caller falls back to software
/// timestamps).
pub fn best_sample(
    tries: usize,
    mut read_wall_ns: impl FnMut() -> u64,
    mut read_raw: impl FnMut() -> Option<u64>,
    mask: u64,
) -> Option<ClockSample> {
    let mut best: Option<ClockSample> = None;
    for _ in 0..tries.max(1) {
        let w0 = read_wall_ns();
        let raw = read_raw()? & mask;
        let w1 = read_wall_ns();
        let (lo, hi) = if w1 >= w0 { (w0, w1) } else { (w1, w0) };
        let s = ClockSample {
            raw,
            wall_ns: lo + (hi - lo) / 2,
            uncertainty_ns: hi - lo,
        };
        if best.is_none_or(|b| s.uncertainty_ns < b.uncertainty_ns) {
            best = Some(s);
        }
    }
    best
}

/// Estimate the counter frequency (Hz) from two samples; `None` when they
/// are too close together or inconsistent to say anything.
pub fn estimate_hz(a: ClockSample, b: ClockSample, mask: u64) -> Option<f64> {
    let (first, second) = if b.wall_ns >= a.wall_ns {
        (a, b)
    } else {
        (b, a)
    };
    let wall = second.wall_ns - first.wall_ns;
    // Below 1 ms of separation the bracket uncertainty dominates.
    if wall < 1_000_000 {
        return None;
    }
    let cycles = wrapping_delta(second.raw, first.raw, mask);
    if cycles == 0 {
        return None;
    }
    Some(cycles as f64 * NS_PER_S as f64 / wall as f64)
}

/// Maps raw CQE timestamps of one RNIC to wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSync {
    mask: u64,
    /// Counter frequency in Hz (nominal until two samples refine it).
    hz: f64,
    nominal_hz: f64,
    reference: ClockSample,
}

impl ClockSync {
    /// Start from one sample and the nominal `hca_core_clock` (kHz).
    /// Returns `None` when the device gave no usable mask or frequency.
    pub fn new(mask: u64, hca_core_clock_khz: u64, sample: ClockSample) -> Option<ClockSync> {
        if !valid_mask(mask) || hca_core_clock_khz == 0 {
            return None;
        }
        let hz = hca_core_clock_khz as f64 * 1e3;
        Some(ClockSync {
            mask,
            hz,
            nominal_hz: hz,
            reference: ClockSample {
                raw: sample.raw & mask,
                ..sample
            },
        })
    }

    #[cfg(test)]
    /// Test helper.
    pub fn hz(&self) -> f64 {
        self.hz
    }

    #[cfg(test)]
    /// Test helper.
    pub fn reference(&self) -> ClockSample {
        self.reference
    }

    /// Take a newer sample: refine the frequency from the drift since the
    /// previous reference (accepted only within 1% of nominal, so one bad
    /// sample cannot wreck conversions) and move the reference.
    pub fn update(&mut self, sample: ClockSample) {
        let sample = ClockSample {
            raw: sample.raw & self.mask,
            ..sample
        };
        let elapsed = sample.wall_ns.saturating_sub(self.reference.wall_ns);
        // Only refine across intervals shorter than half a wrap, where the
        // cycle delta is unambiguous.
        if elapsed < wrap_period_ns(self.mask, self.hz) / 2 {
            if let Some(hz) = estimate_hz(self.reference, sample, self.mask) {
                if (hz - self.nominal_hz).abs() <= self.nominal_hz * 0.01 {
                    self.hz = hz;
                }
            }
        }
        self.reference = sample;
    }

    /// Wall time (ns since the epoch) of raw timestamp `ts`.
    pub fn wall_ns_of(&self, ts: u64) -> u64 {
        let d = signed_delta(ts & self.mask, self.reference.raw, self.mask);
        let ns = cycles_to_ns(d, self.hz);
        if ns >= 0 {
            self.reference.wall_ns.saturating_add(ns as u64)
        } else {
            self.reference.wall_ns.saturating_sub(ns.unsigned_abs())
        }
    }

    /// Nanoseconds from raw timestamp `earlier` to `later` (both on this
    /// NIC), independent of the wall-clock mapping.
    #[cfg(test)]
    pub fn interval_ns(&self, later: u64, earlier: u64) -> i64 {
        cycles_to_ns(signed_delta(later, earlier, self.mask), self.hz)
    }

    /// True when the reference is so old that wrap-around could make
    /// conversions ambiguous: recalibrate at least this often.
    pub fn needs_refresh(&self, now_wall_ns: u64) -> bool {
        let max_age = (wrap_period_ns(self.mask, self.hz) / 4).min(10 * NS_PER_S as u64);
        now_wall_ns.saturating_sub(self.reference.wall_ns) >= max_age
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASK48: u64 = (1 << 48) - 1;
    const MASK32: u64 = (1 << 32) - 1;

    #[test]
    fn delta_without_wrap() {
        assert_eq!(wrapping_delta(1_500, 1_000, MASK48), 500);
        assert_eq!(signed_delta(1_500, 1_000, MASK48), 500);
        assert_eq!(signed_delta(1_000, 1_500, MASK48), -500);
    }

    #[test]
    fn delta_across_wrap() {
        // Counter wrapped from near the top of a 32-bit range to a small value.
        let before = MASK32 - 99; // 100 cycles before wrap
        let after = 50;
        assert_eq!(wrapping_delta(after, before, MASK32), 150);
        assert_eq!(signed_delta(after, before, MASK32), 150);
        assert_eq!(signed_delta(before, after, MASK32), -150);
    }

    #[test]
    fn delta_full_64_bit_mask() {
        assert_eq!(signed_delta(5, u64::MAX - 4, u64::MAX), 10);
        assert_eq!(signed_delta(u64::MAX - 4, 5, u64::MAX), -10);
    }

    #[test]
    fn mask_validation() {
        assert!(valid_mask(MASK48));
        assert!(valid_mask(u64::MAX));
        assert!(!valid_mask(0));
        assert!(!valid_mask(0xff));
        assert!(!valid_mask(0xf0f0_ffff));
    }

    #[test]
    fn cycles_convert_at_nominal_rate() {
        // 156.25 MHz (a common ConnectX core clock): 1 cycle = 6.4 ns.
        assert_eq!(cycles_to_ns(1_000, 156_250_000.0), 6_400);
        assert_eq!(cycles_to_ns(-1_000, 156_250_000.0), -6_400);
        assert_eq!(cycles_to_ns(5, 0.0), 0);
    }

    #[test]
    fn wrap_period() {
        // 32 bits at 1 GHz wrap after ~4.29 s.
        assert_eq!(wrap_period_ns(MASK32, 1e9), 4_294_967_296);
        assert_eq!(wrap_period_ns(MASK32, 0.0), u64::MAX);
    }

    #[test]
    fn best_sample_keeps_tightest_bracket() {
        // Wall reads: (100, 180) then (1000, 1010) then (2000, 2500).
        let walls = [100u64, 180, 1_000, 1_010, 2_000, 2_500];
        let mut i = 0;
        let raws = [7u64, 8, 9];
        let mut j = 0;
        let s = best_sample(
            3,
            || {
                i += 1;
                walls[i - 1]
            },
            || {
                j += 1;
                Some(raws[j - 1])
            },
            MASK48,
        )
        .unwrap();
        assert_eq!(
            s,
            ClockSample {
                raw: 8,
                wall_ns: 1_005,
                uncertainty_ns: 10
            }
        );
        assert!(best_sample(3, || 0, || None, MASK48).is_none());
    }

    #[test]
    fn frequency_estimate() {
        let a = ClockSample {
            raw: 1_000,
            wall_ns: 0,
            uncertainty_ns: 0,
        };
        let b = ClockSample {
            raw: 1_000 + 1_000_000,
            wall_ns: 1_000_000_000,
            uncertainty_ns: 0,
        };
        let hz = estimate_hz(a, b, MASK48).unwrap();
        assert!((hz - 1e6).abs() < 1e-6, "{hz}");
        // Order does not matter; too-close samples give nothing.
        assert_eq!(estimate_hz(b, a, MASK48), Some(hz));
        let c = ClockSample { wall_ns: 10, ..b };
        assert_eq!(estimate_hz(a, c, MASK48), None);
    }

    fn sync_1ghz(raw: u64, wall: u64, mask: u64) -> ClockSync {
        ClockSync::new(
            mask,
            1_000_000,
            ClockSample {
                raw,
                wall_ns: wall,
                uncertainty_ns: 0,
            },
        )
        .unwrap()
    }

    #[test]
    fn sync_rejects_devices_without_timestamps() {
        let s = ClockSample {
            raw: 0,
            wall_ns: 0,
            uncertainty_ns: 0,
        };
        assert!(ClockSync::new(0, 1_000_000, s).is_none());
        assert!(ClockSync::new(MASK48, 0, s).is_none());
    }

    #[test]
    fn wall_conversion_before_and_after_reference() {
        let wall0 = 1_700_000_000_000_000_000;
        let s = sync_1ghz(5_000, wall0, MASK48);
        assert_eq!(s.wall_ns_of(5_000), wall0);
        assert_eq!(s.wall_ns_of(7_500), wall0 + 2_500);
        assert_eq!(s.wall_ns_of(4_000), wall0 - 1_000);
    }

    #[test]
    fn wall_conversion_across_wrap() {
        let wall0 = 1_700_000_000_000_000_000;
        // Reference 1,000 cycles before a 32-bit wrap; a CQE 3,000 cycles
        // later reads as 2,000 after the wrap.
        let s = sync_1ghz(MASK32 - 999, wall0, MASK32);
        assert_eq!(s.wall_ns_of(2_000 - 1), wall0 + 2_999);
        assert_eq!(s.wall_ns_of(2_000 - 1 + (1 << 32)), wall0 + 2_999);
        // And a CQE stamped before the reference, itself before the wrap.
        assert_eq!(s.wall_ns_of(MASK32 - 1_999), wall0 - 1_000);
        // Intervals across the wrap are positive and exact.
        assert_eq!(s.interval_ns(10, MASK32 - 9), 20);
    }

    #[test]
    fn update_refines_frequency_within_bounds() {
        let mut s = sync_1ghz(0, 0, MASK48);
        // The counter actually runs 0.1% fast: 1.001e9 cycles per second.
        s.update(ClockSample {
            raw: 1_001_000_000,
            wall_ns: 1_000_000_000,
            uncertainty_ns: 0,
        });
        assert!((s.hz() - 1.001e9).abs() < 1.0, "{}", s.hz());
        assert_eq!(s.wall_ns_of(1_001_000_000 + 1_001), 1_000_000_000 + 1_000);
        // A wild sample (50% off) moves the reference but keeps the rate.
        s.update(ClockSample {
            raw: 1_001_000_000 + 1_500_000_000,
            wall_ns: 2_000_000_000,
            uncertainty_ns: 0,
        });
        assert!((s.hz() - 1.001e9).abs() < 1.0);
        assert_eq!(s.reference().wall_ns, 2_000_000_000);
    }

    #[test]
    fn refresh_schedule_follows_wrap_period() {
        // 32 bits at 1 GHz: refresh within a quarter wrap (~1.07 s).
        let s = sync_1ghz(0, 0, MASK32);
        assert!(!s.needs_refresh(1_000_000_000));
        assert!(s.needs_refresh(1_100_000_000));
        // 48 bits: capped at 10 s.
        let s = sync_1ghz(0, 0, MASK48);
        assert!(!s.needs_refresh(9_000_000_000));
        assert!(s.needs_refresh(10_000_000_000));
    }
}
