//! The thin libibverbs layer: open RNICs, one UD queue pair per RNIC, post
//! sends and receives, and poll completions with their timestamps.
//!
//! It turns verbs into [`Completion`](super::completion::Completion)s and
//! takes packet bytes; the exchange logic lives in the safe
//! `probe::rdma` modules. Several verbs used here are `static inline` in
//! `verbs.h` (`ibv_create_cq_ex`, `ibv_query_rt_values_ex`,
//! `ibv_query_device_ex`, `ibv_poll_cq`, `ibv_post_send`, ...), which
//! bindgen cannot bind; they are re-implemented below exactly as the header
//! does: through the context's op table or the extended `verbs_context`
//! that sits in memory right before `ibv_context`.

mod ctx;
mod device;
mod io;
#[cfg(test)]
mod tests;

pub use device::{is_recv_wr, list_devices, Nic, Unavailable, RECV_TAG};
