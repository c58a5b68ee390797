//! The project's token bucket, for anything that must not be done faster
//! than a rate with a bounded burst (`rate_limit` of the web
//! configuration, on-demand path traces, automatic traces). Pure: the
//! caller passes the time, so tests drive the clock.

use std::time::{Duration, Instant};

/// A token bucket: `tokens` back every `period`, at most `burst` saved.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    tokens_per_period: f64,
    period: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now` that gets `tokens` (at least 1) back every
    /// `period` (at least 1 ns) and holds at most `burst` (at least 1).
    pub fn new(tokens: u32, period: Duration, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            tokens_per_period: f64::from(tokens.max(1)),
            period: period.as_secs_f64().max(1e-9),
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// One token back every `interval`.
    pub fn every(interval: Duration, burst: u32, now: Instant) -> TokenBucket {
        TokenBucket::new(1, interval, burst, now)
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        // Multiply before dividing: 6 s of 10 a minute is exactly 1.
        let earned = dt * self.tokens_per_period / self.period;
        self.tokens = (self.tokens + earned).min(self.burst);
        self.at = self.at.max(now);
    }

    /// Whether a token is there at `now` (none is taken).
    pub fn available(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= 1.0 - 1e-9
    }

    /// Take a token; false when the bucket is empty.
    pub fn take(&mut self, now: Instant) -> bool {
        let ok = self.available(now);
        if ok {
            self.tokens -= 1.0;
        }
        ok
    }

    /// Time until the next token is there (zero when one is).
    pub fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        let missing = (1.0 - self.tokens).max(0.0);
        Duration::from_secs_f64((missing * self.period / self.tokens_per_period).min(1e9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_one_per_interval() {
        let t0 = Instant::now();
        let mut b = TokenBucket::every(Duration::from_secs(10), 3, t0);
        assert!(b.take(t0) && b.take(t0) && b.take(t0));
        assert!(!b.take(t0), "burst spent");
        assert_eq!(b.wait(t0), Duration::from_secs(10));
        assert!(!b.take(t0 + Duration::from_secs(9)));
        assert!(b.take(t0 + Duration::from_secs(10)));
        assert!(!b.take(t0 + Duration::from_secs(10)));
        // Never more than the burst saved up, however long the pause.
        let later = t0 + Duration::from_secs(3600);
        assert!(b.take(later) && b.take(later) && b.take(later));
        assert!(!b.take(later));
    }

    #[test]
    fn a_clock_going_back_gives_nothing() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let mut b = TokenBucket::new(1, Duration::from_secs(1), 1, t0);
        assert!(b.take(t0));
        assert!(!b.take(t0 - Duration::from_secs(50)));
        assert!(b.take(t0 + Duration::from_secs(1)));
    }
}
