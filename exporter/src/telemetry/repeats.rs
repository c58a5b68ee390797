//! Log lines that aggregate repeats: the first occurrence of a kind of
//! message is logged; further ones within the window are only counted and
//! summarised as "… repeated N times in the last 60 s" when the window
//! ends. Pure (the caller passes the time) and bounded by the number of
//! message kinds, which are `&'static str` keys.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What to do with one occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Log it; `repeated` earlier occurrences of the same key were only
    /// counted in the window that just ended (log that summary first).
    Log {
        /// Suppressed occurrences of the previous window.
        repeated: u64,
    },
    /// Counted, not logged.
    Suppress,
}

/// Repeat aggregation by message key.
#[derive(Debug, Clone)]
pub struct Repeats {
    window: Duration,
    /// Per key: the window's start and the occurrences suppressed in it.
    keys: HashMap<&'static str, (Instant, u64)>,
}

impl Repeats {
    /// Aggregate over `window` (60 s in the exporter).
    pub fn new(window: Duration) -> Repeats {
        Repeats {
            window,
            keys: HashMap::new(),
        }
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// One occurrence of `key` at `now`.
    pub fn hit(&mut self, key: &'static str, now: Instant) -> Verdict {
        match self.keys.get_mut(key) {
            Some((start, n)) if now.saturating_duration_since(*start) < self.window => {
                *n += 1;
                Verdict::Suppress
            }
            Some((start, n)) => {
                let repeated = *n;
                (*start, *n) = (now, 0);
                Verdict::Log { repeated }
            }
            None => {
                self.keys.insert(key, (now, 0));
                Verdict::Log { repeated: 0 }
            }
        }
    }

    /// Windows that ended by `now` with suppressed occurrences: their key
    /// and count, to be logged as summaries (keys that went quiet). The
    /// key is forgotten, so its next occurrence is logged.
    pub fn flush(&mut self, now: Instant) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        self.keys.retain(|key, (start, n)| {
            if now.saturating_duration_since(*start) < self.window {
                return true;
            }
            if *n > 0 {
                out.push((*key, *n));
            }
            false
        });
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_is_logged_repeats_are_summarised() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut r = Repeats::new(s(60));
        assert_eq!(r.hit("trace_failed", t0), Verdict::Log { repeated: 0 });
        for i in 1..=41 {
            assert_eq!(r.hit("trace_failed", t0 + s(i)), Verdict::Suppress);
        }
        assert_eq!(r.hit("other", t0 + s(2)), Verdict::Log { repeated: 0 });
        // The next window's first occurrence carries the summary.
        assert_eq!(
            r.hit("trace_failed", t0 + s(61)),
            Verdict::Log { repeated: 41 }
        );
        assert_eq!(r.hit("trace_failed", t0 + s(62)), Verdict::Suppress);
    }

    #[test]
    fn quiet_keys_are_flushed_with_their_count() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut r = Repeats::new(s(60));
        r.hit("a", t0);
        r.hit("a", t0 + s(1));
        r.hit("a", t0 + s(2));
        r.hit("b", t0);
        assert!(r.flush(t0 + s(30)).is_empty(), "window still open");
        assert_eq!(r.flush(t0 + s(60)), vec![("a", 2)], "b had no repeats");
        assert_eq!(r.hit("a", t0 + s(61)), Verdict::Log { repeated: 0 });
        assert!(r.keys.len() <= 2, "bounded by the keys");
    }
}
