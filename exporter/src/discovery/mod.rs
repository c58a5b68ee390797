//! Peer discovery sources, one file per source: [`static_list`], [`dns`],
//! [`tor_mesh`], and traffic discovery ([`traffic`] over eBPF events or
//! [`sockdiag`] polls, through the pure [`skeleton`] rule, with
//! [`cgroup`] filters). Each source owns its slot of the [`PeerSet`] and
//! replaces its whole list whenever it learns something new; none of them
//! knows about probing. [`registry`] picks the configured sources.
//!
//! May use `model/`, `sys/`, `wire/`, `config/` and `telemetry/`.

pub mod cgroup;
mod cgroup_map;
pub mod dns;
pub mod peer_set;
pub mod registry;
pub mod skeleton;
pub mod sockdiag;
pub mod static_list;
pub mod tor_mesh;
pub mod traffic;
pub mod traffic_source;

pub use peer_set::PeerSet;
