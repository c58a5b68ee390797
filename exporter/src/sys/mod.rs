//! The one door to the kernel and libibverbs: every `unsafe` block of the
//! exporter lives in this folder, each with a `// SAFETY:` comment, behind
//! safe functions and types. Nothing here knows about probing, discovery or
//! metrics; it may use [`crate::model`] and [`crate::wire`] types only.

pub mod batch;
pub mod caps;
pub mod cgroup;
pub mod completion;
pub mod ebpf;
pub mod eventfd;
pub mod host;
pub mod netns;
pub mod poll;
pub mod raw;
pub mod snmp;
pub mod sock;
pub mod time;
#[cfg(feature = "rdma")]
pub mod verbs;
