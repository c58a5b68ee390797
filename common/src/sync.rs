//! Locks that survive a panicked holder: the exporter's and localizer's
//! shared state (series books, peer tables) stays usable after one task
//! panicked, rather than poisoning every later caller.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Lock `m`, taking the guard of a poisoned mutex as it is.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
