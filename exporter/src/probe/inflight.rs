//! Outstanding probes of one prober: the RTT/loss accounting.
//!
//! Every probe is inserted once; it leaves the table exactly once, either
//! answered ([`InFlight::complete`]) or lost ([`InFlight::expire`]). A reply
//! for a sequence number that already left is classified (late after loss,
//! duplicate after an answer, unknown) and never counted again, so loss and
//! RTT can not be double-counted whatever the network does.

use super::Target;
use crate::telemetry::Series;
use std::collections::VecDeque;
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

/// Where one sequence number stands.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Never registered (a gap in the numbers).
    Vacant,
    /// Outstanding; its data is at this index of the slab.
    Pending(u32),
    /// Left the table at the instant: answered or lost.
    Done(Finished, Instant),
}

/// Most sequence numbers the table spans (outstanding and remembered):
/// 24 MB of slots at most. The defaults need 6 s of probes (60,000 at
/// 10,000 peers); past the span the oldest go, outstanding ones as lost.
const MAX_SPAN: u64 = 1 << 20;

/// The in-flight table, indexed by sequence number.
///
/// Sequence numbers come from one counter per prober, so the live ones are
/// a window: a ring of slots indexed by `seq - base` replaces hash maps
/// (no hashing, no allocation once the ring and slab have grown), and the
/// data of outstanding probes sits in a slab reused as they leave.
#[derive(Debug)]
pub struct InFlight<T> {
    timeout: Duration,
    /// The sequence number of `slots[0]`.
    base: u64,
    slots: VecDeque<Slot>,
    /// Data of outstanding probes; `free` lists the empty places.
    slab: Vec<Option<Pending<T>>>,
    free: Vec<u32>,
    /// Sequence numbers in send order with their deadline; the timeout is
    /// the same for all, so send order is expiry order.
    order: VecDeque<(u64, Instant)>,
    /// Outstanding probes pushed out of the span, lost at the next expiry.
    evicted: Vec<Pending<T>>,
}

impl<T> InFlight<T> {
    /// An empty table; probes older than `timeout` are lost.
    pub fn new(timeout: Duration) -> Self {
        InFlight {
            timeout,
            base: 0,
            slots: VecDeque::new(),
            slab: Vec::new(),
            free: Vec::new(),
            order: VecDeque::new(),
            evicted: Vec::new(),
        }
    }

    #[cfg(test)]
    /// Test helper: outstanding probes.
    pub fn len(&self) -> usize {
        self.slab.len() - self.free.len() + self.evicted.len()
    }

    #[cfg(test)]
    /// Test helper.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ring index of `seq`, if the table spans it.
    fn offset(&self, seq: u64) -> Option<usize> {
        let off = seq.checked_sub(self.base)?;
        (off < self.slots.len() as u64).then_some(off as usize)
    }

    /// Take the data of the probe at ring index `off` (which must be
    /// outstanding at slab index `i`) and mark it finished.
    fn finish(&mut self, off: usize, i: u32, f: Finished, now: Instant) -> Option<Pending<T>> {
        self.slots[off] = Slot::Done(f, now);
        let p = self.slab.get_mut(i as usize)?.take();
        self.free.push(i);
        p
    }

    /// Drop the front slot; an outstanding probe there goes to `evicted`.
    fn pop_front(&mut self) {
        if let Some(Slot::Pending(i)) = self.slots.pop_front() {
            if let Some(p) = self.slab.get_mut(i as usize).and_then(Option::take) {
                self.free.push(i);
                self.evicted.push(p);
            }
        }
        self.base += 1;
    }

    /// Whether [`InFlight::insert`] takes `seq`: numbers must grow from one
    /// insert to the next (one counter, one sending task), so a reused or
    /// older number replaces nothing.
    pub fn accepts(&self, seq: u64) -> bool {
        self.slots.is_empty() || seq >= self.base + self.slots.len() as u64
    }

    /// Register a probe sent at `sent_at`; `false` (and nothing changed)
    /// unless the table [`accepts`](InFlight::accepts) `seq`.
    pub fn insert(&mut self, seq: u64, sent_at: Instant, data: T) -> bool {
        if !self.accepts(seq) {
            return false;
        }
        if self.slots.is_empty() {
            self.base = seq;
        }
        while seq - self.base >= MAX_SPAN {
            self.pop_front();
            if self.slots.is_empty() {
                self.base = seq;
            }
        }
        while (self.slots.len() as u64) < seq - self.base {
            self.slots.push_back(Slot::Vacant);
        }
        let pending = Some(Pending { sent_at, data });
        let i = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = pending;
                i
            }
            None => {
                self.slab.push(pending);
                (self.slab.len() - 1) as u32
            }
        };
        self.slots.push_back(Slot::Pending(i));
        self.order.push_back((seq, sent_at + self.timeout));
        true
    }

    /// Forget finished probes older than a few timeouts (and gaps) at the
    /// front: replies to them are unknown from then on.
    fn forget(&mut self, now: Instant) {
        let keep = self.timeout * 4 + Duration::from_secs(1);
        while let Some(front) = self.slots.front() {
            match *front {
                Slot::Vacant => {}
                Slot::Done(_, at) if now.saturating_duration_since(at) > keep => {}
                _ => break,
            }
            self.pop_front();
        }
    }

    /// The data of an outstanding probe (to refine its send timestamp).
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut T> {
        let Slot::Pending(i) = self.slots[self.offset(seq)?] else {
            return None;
        };
        self.slab.get_mut(i as usize)?.as_mut().map(|p| &mut p.data)
    }

    /// A reply for `seq` arrived at `now`. Replies that arrive after the
    /// deadline but before the next [`InFlight::expire`] are still late.
    pub fn complete(&mut self, seq: u64, now: Instant) -> Completion<T> {
        let Some(off) = self.offset(seq) else {
            return Completion::Unknown;
        };
        match self.slots[off] {
            Slot::Pending(i) => {
                let sent_at = self.slab.get(i as usize).and_then(|p| p.as_ref());
                match sent_at.map(|p| now.saturating_duration_since(p.sent_at)) {
                    Some(age) if age <= self.timeout => self
                        .finish(off, i, Finished::Answered, now)
                        .map_or(Completion::Unknown, Completion::Answered),
                    _ => Completion::Late,
                }
            }
            Slot::Done(Finished::Answered, _) => Completion::Duplicate,
            Slot::Done(Finished::Lost, _) => Completion::Late,
            Slot::Vacant => Completion::Unknown,
        }
    }

    /// Remove and return every probe whose deadline passed: these are lost.
    pub fn expire(&mut self, now: Instant) -> Vec<Pending<T>> {
        let mut lost = std::mem::take(&mut self.evicted);
        while let Some(&(seq, deadline)) = self.order.front() {
            if deadline >= now {
                break;
            }
            self.order.pop_front();
            if let Some(off) = self.offset(seq) {
                if let Slot::Pending(i) = self.slots[off] {
                    lost.extend(self.finish(off, i, Finished::Lost, now));
                }
            }
        }
        self.forget(now);
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
    pub series: Arc<Series>,
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
        let mut table = self.lock();
        // Counted only when tracked, so the books balance.
        if table.accepts(seq) {
            sent.series.sent.inc();
            table.insert(seq, sent_at, sent);
        }
    }

    /// Take the probes past their deadline and count them lost; those of
    /// retired targets leave uncounted, and so do those of a peer that
    /// closed every standing connection ([`crate::model::Peer::closed`]):
    /// it left (a finished job's container), and it departs
    /// ([`Target::depart`]: marked away, its series removed, the departure
    /// counted). Returns the counted ones and the peers that newly left.
    pub fn expire_lost(&self, now: Instant) -> (Vec<Sent<F>>, Vec<Arc<Target>>) {
        let expired = self.lock().expire(now);
        let mut lost = Vec::with_capacity(expired.len());
        let mut left = Vec::new();
        for p in expired {
            let t = &p.data.target;
            if t.is_retired() {
                continue;
            }
            if t.peer.closed {
                if t.depart() {
                    left.push(t.clone());
                }
                continue;
            }
            p.data.series.lost_one();
            lost.push(p.data);
        }
        (lost, left)
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

    #[test]
    fn finished_probes_are_remembered_for_a_while_then_unknown() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut f: InFlight<()> = InFlight::new(ms(100));
        assert!(f.insert(10, t0, ()));
        // A gap: 11 and 12 were never registered.
        assert!(f.insert(13, t0, ()));
        assert!(matches!(
            f.complete(10, t0 + ms(1)),
            Completion::Answered(_)
        ));
        assert!(matches!(f.complete(11, t0 + ms(1)), Completion::Unknown));
        assert_eq!(f.expire(t0 + ms(150)).len(), 1, "13 is lost");
        // Within 4 timeouts + 1 s both are still told apart ...
        assert!(matches!(
            f.complete(10, t0 + ms(1000)),
            Completion::Duplicate
        ));
        assert!(matches!(f.complete(13, t0 + ms(1000)), Completion::Late));
        // ... after it they are forgotten, and so is the span.
        assert!(f.expire(t0 + ms(1600)).is_empty());
        assert!(matches!(f.complete(10, t0 + ms(1600)), Completion::Unknown));
        assert!(matches!(f.complete(13, t0 + ms(1600)), Completion::Unknown));
        assert!(f.slots.is_empty());
    }

    #[test]
    fn reused_or_older_numbers_are_refused() {
        let t0 = Instant::now();
        let mut f: InFlight<&str> = InFlight::new(Duration::from_millis(100));
        assert!(f.insert(5, t0, "a"));
        assert!(!f.accepts(5) && !f.insert(5, t0, "b"));
        assert!(!f.accepts(4) && !f.insert(4, t0, "c"));
        assert!(f.insert(6, t0, "d"));
        match f.complete(5, t0) {
            Completion::Answered(p) => assert_eq!(p.data, "a"),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.len(), 1);
    }

    #[test]
    fn the_slab_is_reused_so_steady_probing_does_not_grow_it() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let mut f: InFlight<u64> = InFlight::new(Duration::from_millis(10));
        // 100,000 probes, each answered after the next 3 were sent.
        for seq in 0..100_000u64 {
            let now = t0 + us(seq * 100);
            assert!(f.insert(seq, now, seq));
            if let Some(r) = seq.checked_sub(3) {
                assert!(matches!(f.complete(r, now), Completion::Answered(p) if p.data == r));
            }
            if seq % 100 == 0 {
                assert!(f.expire(now).is_empty());
            }
        }
        assert_eq!(f.len(), 3);
        assert!(f.slab.len() <= 4, "slab grew to {}", f.slab.len());
        // Only the last 4 timeouts + 1 s of numbers (1.04 s, 10,400
        // probes, of the 10 s sent) are remembered, give or take an expiry.
        let keep = 10_400 + 200;
        assert!(f.slots.len() <= keep, "{} slots", f.slots.len());
    }

    #[test]
    fn a_jump_past_the_span_counts_the_oldest_outstanding_as_lost() {
        let t0 = Instant::now();
        let mut f: InFlight<u64> = InFlight::new(Duration::from_secs(100));
        assert!(f.insert(1, t0, 1));
        assert!(f.insert(2, t0, 2));
        assert!(f.insert(MAX_SPAN + 1, t0, 3));
        assert!(f.slots.len() as u64 <= MAX_SPAN);
        // 1 fell out of the span: lost at the next expiry, long before its
        // deadline; 2 and the new one are still in flight.
        let lost: Vec<u64> = f.expire(t0).into_iter().map(|p| p.data).collect();
        assert_eq!(lost, [1]);
        assert_eq!(f.len(), 2);
        assert!(matches!(f.complete(2, t0), Completion::Answered(p) if p.data == 2));
        assert!(matches!(f.complete(1, t0), Completion::Unknown));
    }
}
