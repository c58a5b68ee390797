//! A byte budget shared by requests that run at once: the answers they
//! hold together never exceed it. `--max-response-size` bounds each
//! answer, but a cycle sends all its queries at once, so without a shared
//! bound a store streaming large answers to every query makes the process
//! hold the per-answer limit times the number of queries.
//!
//! Bytes are taken as a buffer grows (its capacity, not its length, so the
//! allocator's doubling is counted) and given back when the buffer is
//! dropped. A request that cannot take what it needs fails at once rather
//! than waiting: its partial buffer would otherwise hold bytes while it
//! waits for the others to give theirs back, which they may be doing too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A byte budget; clones share it.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    limit: usize,
    held: AtomicUsize,
    /// The most held at once since [`ByteBudget::take_peak`] last ran.
    peak: AtomicUsize,
}

impl ByteBudget {
    /// A budget of `limit` bytes (at least one).
    pub fn new(limit: usize) -> ByteBudget {
        ByteBudget {
            state: Arc::new(State {
                limit: limit.max(1),
                held: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
            }),
        }
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.state.limit
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.state.held.load(Ordering::Acquire)
    }

    /// The most bytes held at once since the last call (or the start);
    /// the next period starts from what is held now.
    pub fn take_peak(&self) -> usize {
        self.state.peak.swap(self.held(), Ordering::AcqRel)
    }

    /// Take `n` more bytes for `held`, or leave everything as it was and
    /// say no when the budget has not that much left.
    pub fn take(&self, held: &mut Held, n: usize) -> bool {
        let s = &self.state;
        let taken = s
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                h.checked_add(n).filter(|&t| t <= s.limit)
            });
        match taken {
            Ok(before) => {
                s.peak.fetch_max(before + n, Ordering::AcqRel);
                held.bytes += n;
                true
            }
            Err(_) => false,
        }
    }

    /// An empty holding of this budget.
    pub fn hold(&self) -> Held {
        Held {
            budget: Some(self.clone()),
            bytes: 0,
        }
    }
}

/// Bytes taken from a [`ByteBudget`], given back on drop. Without a
/// budget it counts nothing.
#[derive(Debug, Default)]
pub struct Held {
    budget: Option<ByteBudget>,
    bytes: usize,
}

impl Held {
    /// Take `n` more bytes; always granted without a budget.
    pub fn grow(&mut self, n: usize) -> bool {
        match self.budget.clone() {
            Some(b) => b.take(self, n),
            None => true,
        }
    }

    /// The budget this holds from, when there is one.
    pub fn budget(&self) -> Option<&ByteBudget> {
        self.budget.as_ref()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.state.held.fetch_sub(self.bytes, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holdings_share_the_budget_and_give_back_on_drop() {
        let b = ByteBudget::new(100);
        let mut one = b.hold();
        let mut two = b.hold();
        assert!(one.grow(60));
        assert!(!two.grow(41), "61 + 41 > 100");
        assert_eq!(b.held(), 60, "a refusal takes nothing");
        assert!(two.grow(40));
        assert!(!one.grow(1));
        drop(one);
        assert_eq!(b.held(), 40);
        assert_eq!(b.take_peak(), 100);
        assert_eq!(
            b.take_peak(),
            40,
            "the next period starts from what is held"
        );
        drop(two);
        assert_eq!(b.held(), 0);
        assert!(Held::default().grow(usize::MAX), "no budget: no bound");
    }
}
