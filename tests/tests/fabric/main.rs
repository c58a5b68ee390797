//! Scenarios on namespace fabrics beyond the end-to-end one: multipath and
//! path tracing, RDMA probing, the VXLAN overlay, a rollout and a job that
//! ends, host noise that must not page. One test binary; a module per
//! scenario (`e2e` runs alone, after the others).

mod host_noise;
mod job_lifecycle;
mod multipath;
mod overlay;
mod rdma;
mod traceroute;

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Whose turn it is to run a stack. A scenario that asserts nothing pages
/// while the machine is busy (host noise, a job's end) runs with no other
/// fabric beside it, as it did when each file was its own binary: a second
/// fabric on a 2-core machine would be host noise of its own. The others
/// share the machine, as the tests of one file always did.
static STACKS: RwLock<()> = RwLock::new(());

/// A turn to run a stack with no other fabric beside it.
fn alone() -> RwLockWriteGuard<'static, ()> {
    STACKS.write().unwrap_or_else(PoisonError::into_inner)
}

/// A turn to run a stack beside other such stacks, never beside one that
/// runs [`alone`].
fn beside_others() -> RwLockReadGuard<'static, ()> {
    STACKS.read().unwrap_or_else(PoisonError::into_inner)
}
