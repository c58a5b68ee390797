//! A value read from the system at most once per short period, whoever
//! asks. A scrape reads `/proc` for the process and host figures; where one
//! process serves many registries (the synthetic fleet serves thousands of
//! exporters' `/metrics`, each with its own process collector) or many
//! scrapers arrive at once, those reads are the same answer over and over,
//! and listing `/proc/self/fd` under contention costs more than rendering
//! the probe series. A figure up to the `max_age` given to [`Recent::new`] old is what a
//! scrape would have read a moment earlier.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The last reading and when it was taken; usable as a `static`.
#[derive(Debug)]
pub struct Recent<T> {
    last: Mutex<Option<(Instant, T)>>,
    max_age: Duration,
}

impl<T: Clone> Recent<T> {
    /// Nothing read yet; a reading is reused while younger than `max_age`.
    pub const fn new(max_age: Duration) -> Recent<T> {
        Recent {
            last: Mutex::new(None),
            max_age,
        }
    }

    /// The reading taken at most `max_age` before `now`, else `read()`
    /// taken now (the lock is held while reading, so concurrent callers
    /// wait for one reading instead of each making their own).
    pub fn get_at(&self, now: Instant, read: impl FnOnce() -> T) -> T {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, v)) = last.as_ref() {
            if now.saturating_duration_since(*at) < self.max_age && now >= *at {
                return v.clone();
            }
        }
        let v = read();
        *last = Some((now, v.clone()));
        v
    }

    /// [`Recent::get_at`] now.
    pub fn get(&self, read: impl FnOnce() -> T) -> T {
        self.get_at(Instant::now(), read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_reused_while_young_and_taken_again_when_old() {
        let r: Recent<u32> = Recent::new(Duration::from_secs(1));
        let t0 = Instant::now();
        let mut reads = 0;
        let mut read = |v: u32| {
            reads += 1;
            v
        };
        assert_eq!(r.get_at(t0, || read(1)), 1);
        assert_eq!(r.get_at(t0 + Duration::from_millis(999), || read(2)), 1);
        assert_eq!(r.get_at(t0 + Duration::from_secs(1), || read(3)), 3);
        // A clock that went backwards (an earlier `now` from a slow caller)
        // reads again rather than trusting a reading from its future.
        assert_eq!(r.get_at(t0, || read(4)), 4);
        assert_eq!(reads, 3);
    }
}
