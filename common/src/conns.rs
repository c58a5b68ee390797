//! The HTTP server's table of open connections and which of them are idle
//! (connected or kept alive, no request being answered), oldest first. At
//! the connection limit a new client is admitted by closing the oldest
//! idle connection: otherwise a few hundred clients that connect and send
//! nothing (any pod on a host-network DaemonSet can) hold every slot, and
//! a scrape waits in the backlog until their header timeouts expire.
//! Closing is graceful (hyper's): an idle connection closes at once, a
//! response being written is finished first.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Idle connections closed to admit new ones, over every server of the
/// process (the binaries export it as a counter).
static EVICTED: AtomicU64 = AtomicU64::new(0);

/// Idle connections closed so far to admit new ones, process-wide.
pub fn evicted_total() -> u64 {
    EVICTED.load(Ordering::Relaxed)
}

/// One server's connections.
#[derive(Debug, Default)]
pub struct Conns {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// Ids and idle orders come from one sequence.
    next: u64,
    open: HashMap<u64, Slot>,
    /// Idle connections by the time they became idle: the first is the oldest.
    idle: BTreeMap<u64, u64>,
}

#[derive(Debug)]
struct Slot {
    /// Requests being answered.
    busy: usize,
    /// Its key in [`Table::idle`] while idle and not asked to close.
    idle_at: Option<u64>,
    /// Asked to close: never idle (a candidate) again.
    closing: bool,
    close: Arc<Notify>,
}

impl Table {
    fn tick(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn set_idle(&mut self, id: u64) {
        let at = self.tick();
        if let Some(slot) = self.open.get_mut(&id) {
            slot.idle_at = Some(at);
            self.idle.insert(at, id);
        }
    }
}

impl Conns {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Register a connection just accepted: idle (no request yet) and the
    /// newest.
    pub fn open(self: &Arc<Self>) -> Conn {
        let close = Arc::new(Notify::new());
        let mut t = self.table();
        let id = t.tick();
        t.open.insert(
            id,
            Slot {
                busy: 0,
                idle_at: None,
                closing: false,
                close: close.clone(),
            },
        );
        t.set_idle(id);
        Conn(Arc::new(ConnInner {
            conns: self.clone(),
            id,
            close,
            served: Default::default(),
        }))
    }

    /// Ask the oldest idle connection to close; `false` when none is idle
    /// (every connection is answering a request).
    pub fn close_oldest_idle(&self) -> bool {
        let mut t = self.table();
        let Some((_, id)) = t.idle.pop_first() else {
            return false;
        };
        if let Some(slot) = t.open.get_mut(&id) {
            slot.idle_at = None;
            slot.closing = true;
            slot.close.notify_one();
        }
        EVICTED.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Connections open, and how many of them are idle.
    pub fn counts(&self) -> (usize, usize) {
        let t = self.table();
        (t.open.len(), t.idle.len())
    }
}

/// One open connection; unregistered when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Conn(Arc<ConnInner>);

#[derive(Debug)]
struct ConnInner {
    conns: Arc<Conns>,
    id: u64,
    close: Arc<Notify>,
    /// It has had a request (else it is only connected, or sending headers).
    served: std::sync::atomic::AtomicBool,
}

impl Drop for ConnInner {
    fn drop(&mut self) {
        let mut t = self.conns.table();
        if let Some(slot) = t.open.remove(&self.id) {
            if let Some(at) = slot.idle_at {
                t.idle.remove(&at);
            }
        }
    }
}

impl Conn {
    /// Resolves when the server asks this connection to close.
    pub async fn closing(&self) {
        self.0.close.notified().await;
    }

    /// Whether a request came on it: a connection that only connected (or
    /// is still sending its first headers) has no response to finish.
    pub fn served(&self) -> bool {
        self.0.served.load(Ordering::Relaxed)
    }

    /// A request is being answered until the guard is dropped; then the
    /// connection is idle again, and the newest idle one.
    pub fn busy(&self) -> Busy {
        self.0.served.store(true, Ordering::Relaxed);
        let mut t = self.0.conns.table();
        if let Some(slot) = t.open.get_mut(&self.0.id) {
            slot.busy += 1;
            if let Some(at) = slot.idle_at.take() {
                t.idle.remove(&at);
            }
        }
        Busy(self.clone())
    }
}

/// See [`Conn::busy`].
#[derive(Debug)]
pub struct Busy(Conn);

impl Drop for Busy {
    fn drop(&mut self) {
        let inner = &(self.0).0;
        let mut t = inner.conns.table();
        let Some(slot) = t.open.get_mut(&inner.id) else {
            return;
        };
        slot.busy = slot.busy.saturating_sub(1);
        // A connection already asked to close is not idle again.
        if slot.busy == 0 && !slot.closing {
            t.set_idle(inner.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_idle_connection_is_closed_and_busy_ones_never() {
        let conns = Arc::new(Conns::default());
        let a = conns.open();
        let b = conns.open();
        let c = conns.open();
        // a answers a request: b is now the oldest idle.
        let busy = a.busy();
        assert_eq!(conns.counts(), (3, 2));
        let before = evicted_total();
        assert!(conns.close_oldest_idle());
        assert!(evicted_total() > before);
        // b was told; a, busy, was not.
        asked_to_close(&b);
        drop(busy);
        // a is idle again, after c: c goes next, then a.
        assert!(conns.close_oldest_idle());
        asked_to_close(&c);
        assert!(conns.close_oldest_idle());
        asked_to_close(&a);
        assert!(!conns.close_oldest_idle(), "nothing idle left");
        drop((a, b, c));
        assert_eq!(conns.counts(), (0, 0));
    }

    /// `conn` has been asked to close (its notification is stored).
    fn asked_to_close(conn: &Conn) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), conn.closing())
                .await
                .expect("asked to close");
        });
    }
}
