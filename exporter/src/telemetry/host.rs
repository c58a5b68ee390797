//! Counters the kernel keeps and the exporter republishes: a socket's
//! `SO_RXQ_OVFL` drop count (cumulative, per socket) and the host's UDP
//! `RcvbufErrors` (cumulative, per network namespace) and its cgroup's
//! CPU-throttled time. All are turned into Prometheus counters by adding
//! what grew since the last reading.

use prometheus_client::metrics::counter::Counter;
use std::sync::atomic::{AtomicU64, Ordering};

/// One socket's drop counter: owned by that socket's receive loop, fed
/// with the cumulative count the kernel attaches to datagrams.
#[derive(Debug)]
pub struct SocketDrops {
    counter: Counter,
    last: u32,
}

impl SocketDrops {
    pub(super) fn new(counter: Counter) -> SocketDrops {
        SocketDrops { counter, last: 0 }
    }

    /// Take the kernel's cumulative count of one received datagram
    /// (`None`: no drop so far, the kernel attaches nothing).
    pub fn observe(&mut self, cumulative: Option<u32>) {
        let Some(now) = cumulative else { return };
        // The kernel's counter is a u32 that wraps.
        let grew = now.wrapping_sub(self.last);
        self.last = now;
        self.counter.inc_by(u64::from(grew));
    }
}

/// A host-wide cumulative kernel counter, read now and then.
#[derive(Debug, Default)]
pub struct KernelCounter {
    last: AtomicU64,
}

impl KernelCounter {
    /// Add to `counter` what the kernel's `total` grew by since the last
    /// reading (the first reading counts from 0: drops before the exporter
    /// started are drops too). A smaller total (a counter reset) restarts
    /// from it.
    pub fn update(&self, counter: &Counter, total: u64) {
        counter.inc_by(self.grew(total));
    }

    /// [`KernelCounter::update`] of a total in ns into a counter in
    /// seconds.
    pub fn update_ns(&self, counter: &Counter<f64, AtomicU64>, total_ns: u64) {
        counter.inc_by(self.grew(total_ns) as f64 * 1e-9);
    }

    /// What `total` grew by since the last reading, which it becomes.
    fn grew(&self, total: u64) -> u64 {
        total.saturating_sub(self.last.swap(total, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_drops_add_what_grew_and_survive_the_wrap() {
        let c = Counter::default();
        let mut d = SocketDrops::new(c.clone());
        d.observe(None);
        assert_eq!(c.get(), 0);
        d.observe(Some(3));
        d.observe(Some(3));
        d.observe(Some(10));
        assert_eq!(c.get(), 10);
        d.last = u32::MAX - 1;
        d.observe(Some(2));
        assert_eq!(c.get(), 14);
    }

    #[test]
    fn kernel_counter_follows_the_total() {
        let c = Counter::default();
        let k = KernelCounter::default();
        k.update(&c, 7);
        k.update(&c, 7);
        k.update(&c, 12);
        assert_eq!(c.get(), 12);
        k.update(&c, 2); // reset: nothing added, counts on from 2
        k.update(&c, 5);
        assert_eq!(c.get(), 15);
    }
}
