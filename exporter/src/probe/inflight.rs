//! Outstanding probes of one prober: the RTT/loss accounting.
//!
//! Every probe is inserted once; it leaves the table exactly once, either
//! answered ([`InFlight::complete`]) or lost ([`InFlight::expire`]). A reply
//! for a sequence number that already left is classified (late after loss,
//! duplicate after an answer, unknown) and never counted again, so loss and
//! RTT can not be double-counted whatever the network does.

use super::Target;
use crate::telemetry::Series;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// One outstanding probe; `T` is whatever the prober needs to record the
/// result (target, series handles, send timestamp).
#[derive(Debug)]
pub struct Pending<T> {
    /// When the probe left.
    pub sent_at: Instant,
    /// What the prober records the result with.
    pub data: T,
}

/// What a reply turned out to be.
#[derive(Debug)]
pub enum Completion<T> {
    /// The first reply to an outstanding probe.
    Answered(Pending<T>),
    /// The probe was already counted lost.
    Late,
    /// The probe was already answered.
    Duplicate,
    /// Never sent by us (or forgotten long ago).
    Unknown,
}

/// The `reason` labels of [`Completion::reason`] other than an answer.
pub const REPLY_ERROR_REASONS: [&str; 3] = ["late_reply", "duplicate_reply", "unknown_reply"];

impl<T> Completion<T> {
    /// The `reason` label for replies that are not answers.
    pub fn reason(&self) -> &'static str {
        match self {
            Completion::Answered(_) => "answered",
            Completion::Late => "late_reply",
            Completion::Duplicate => "duplicate_reply",
            Completion::Unknown => "unknown_reply",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finished {
    Answered,
    Lost,
}

/// The in-flight table, keyed by sequence number.
#[derive(Debug)]
pub struct InFlight<T> {
    timeout: Duration,
    pending: HashMap<u64, Pending<T>>,
    /// Sequence numbers in send order with their deadline; the timeout is
    /// the same for all, so send order is expiry order.
    order: VecDeque<(u64, Instant)>,
    /// Recently finished probes, to tell late and duplicate replies apart.
    finished: HashMap<u64, Finished>,
    finished_order: VecDeque<(u64, Instant)>,
}

impl<T> InFlight<T> {
    /// An empty table; probes older than `timeout` are lost.
    pub fn new(timeout: Duration) -> Self {
        InFlight {
            timeout,
            pending: HashMap::new(),
            order: VecDeque::new(),
            finished: HashMap::new(),
            finished_order: VecDeque::new(),
        }
    }

    #[cfg(test)]
    /// Test helper.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    #[cfg(test)]
    /// Test helper.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Register a probe sent at `sent_at`. A reused sequence number replaces
    /// nothing: the caller's counter never repeats within a process.
    pub fn insert(&mut self, seq: u64, sent_at: Instant, data: T) {
        if self.pending.contains_key(&seq) {
            return;
        }
        self.pending.insert(seq, Pending { sent_at, data });
        self.order.push_back((seq, sent_at + self.timeout));
    }

    fn remember(&mut self, seq: u64, f: Finished, now: Instant) {
        self.finished.insert(seq, f);
        self.finished_order.push_back((seq, now));
        // Keep memory of finished probes for a few timeouts.
        let keep = self.timeout * 4 + Duration::from_secs(1);
        while let Some(&(s, at)) = self.finished_order.front() {
            if now.saturating_duration_since(at) <= keep {
                break;
            }
            self.finished_order.pop_front();
            self.finished.remove(&s);
        }
    }

    /// The data of an outstanding probe (to refine its send timestamp).
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut T> {
        self.pending.get_mut(&seq).map(|p| &mut p.data)
    }

    /// A reply for `seq` arrived at `now`. Replies that arrive after the
    /// deadline but before the next [`InFlight::expire`] are still late.
    pub fn complete(&mut self, seq: u64, now: Instant) -> Completion<T> {
        match self.pending.get(&seq) {
            Some(p) if now.saturating_duration_since(p.sent_at) <= self.timeout => {
                let p = self.pending.remove(&seq).expect("present");
                self.remember(seq, Finished::Answered, now);
                Completion::Answered(p)
            }
            Some(_) => Completion::Late,
            None => match self.finished.get(&seq) {
                Some(Finished::Answered) => Completion::Duplicate,
                Some(Finished::Lost) => Completion::Late,
                None => Completion::Unknown,
            },
        }
    }

    /// Remove and return every probe whose deadline passed: these are lost.
    pub fn expire(&mut self, now: Instant) -> Vec<Pending<T>> {
        let mut lost = Vec::new();
        while let Some(&(seq, deadline)) = self.order.front() {
            if deadline >= now {
                break;
            }
            self.order.pop_front();
            if let Some(p) = self.pending.remove(&seq) {
                self.remember(seq, Finished::Lost, now);
                lost.push(p);
            }
        }
        lost
    }
}

/// An [`InFlight`] table shared by a prober's send path and its receive
/// task. Every table method finishes its update before it returns, so a
/// panic elsewhere while the lock was held leaves the table whole: the
/// lock's poison is ignored rather than losing the accounting.
#[derive(Debug)]
pub struct SharedInFlight<T>(Mutex<InFlight<T>>);

impl<T> SharedInFlight<T> {
    /// An empty table; probes older than `timeout` are lost.
    pub fn new(timeout: Duration) -> Self {
        SharedInFlight(Mutex::new(InFlight::new(timeout)))
    }

    /// The table, for one call.
    pub fn lock(&self) -> MutexGuard<'_, InFlight<T>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a packet prober (ICMP, UDP) keeps of a probe in flight; `F` is
/// the flow that carried it (UDP: one of K; ICMP: `()`, its one flow).
#[derive(Debug)]
pub struct Sent<F> {
    /// Whom it went to.
    pub target: Arc<Target>,
    /// The series it counts in (cached on the target).
    pub series: Series,
    /// When it left, wall clock ns (a kernel transmit timestamp, where the
    /// prober has one, replaces the user-space time).
    pub tx_ns: u64,
    /// The flow that carried it.
    pub flow: F,
}

impl<F> SharedInFlight<Sent<F>> {
    /// Count a probe as sent and register it, before it goes out: on a
    /// multi-threaded runtime its reply can be processed before the send
    /// returns.
    pub fn register(&self, seq: u64, sent_at: Instant, sent: Sent<F>) {
        sent.series.sent.inc();
        self.lock().insert(seq, sent_at, sent);
    }

    /// Take the probes past their deadline and count them lost; those of
    /// retired targets leave uncounted. Returns the counted ones.
    pub fn expire_lost(&self, now: Instant) -> Vec<Sent<F>> {
        let expired = self.lock().expire(now);
        let mut lost = Vec::with_capacity(expired.len());
        for p in expired {
            if !p.data.target.is_retired() {
                p.data.series.lost_one();
                lost.push(p.data);
            }
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answered_late_duplicate_unknown() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f: InFlight<&str> = InFlight::new(ms(100));
        f.insert(1, t0, "a");
        f.insert(2, t0, "b");
        f.insert(3, t0 + ms(50), "c");
        match f.complete(1, t0 + ms(10)) {
            Completion::Answered(p) => assert_eq!(p.data, "a"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(f.complete(1, t0 + ms(11)), Completion::Duplicate));
        // 2 expires at t0+100; at t0+120 it is lost, 3 is still in flight.
        let lost = f.expire(t0 + ms(120));
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].data, "b");
        assert!(matches!(f.complete(2, t0 + ms(130)), Completion::Late));
        assert!(matches!(f.complete(9, t0 + ms(130)), Completion::Unknown));
        assert_eq!(f.len(), 1);
        // A reply past the deadline but before expire() ran is late, and
        // the probe is then counted lost exactly once.
        assert!(matches!(f.complete(3, t0 + ms(151)), Completion::Late));
        assert_eq!(f.expire(t0 + ms(200)).len(), 1);
        assert!(f.is_empty());
        assert!(f.expire(t0 + ms(400)).is_empty());
    }

    #[test]
    fn every_probe_is_answered_or_lost_exactly_once() {
        // Simulate 10,000 probes with deterministic loss, duplicates and
        // late replies; the books must balance.
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f: InFlight<u64> = InFlight::new(ms(50));
        let (mut answered, mut lost, mut ignored) = (0u64, 0u64, 0u64);
        let n = 10_000u64;
        for seq in 0..n {
            let now = t0 + ms(seq);
            f.insert(seq, now, seq);
            lost += f.expire(now).len() as u64;
            // Every 5th probe is never answered, the others after 3 ms;
            // every 7th answer is duplicated.
            if seq >= 3 && (seq - 3) % 5 != 0 {
                let r = seq - 3;
                match f.complete(r, now) {
                    Completion::Answered(_) => answered += 1,
                    other => panic!("{r}: {other:?}"),
                }
                if r % 7 == 0 {
                    assert!(matches!(f.complete(r, now), Completion::Duplicate));
                    ignored += 1;
                }
            }
        }
        lost += f.expire(t0 + ms(n + 100)).len() as u64;
        assert_eq!(answered + lost, n, "answered {answered} lost {lost}");
        assert!(ignored > 0);
        // The unanswered fifth, plus the last three whose reply never came
        // (of which one, 9_995, is already in the fifth).
        let expected = n / 5 + (n - 3..n).filter(|s| s % 5 != 0).count() as u64;
        assert_eq!(lost, expected);
    }
}
