//! Peer discovery sources. Each one owns its slot of the [`PeerSet`] and
//! replaces its whole list whenever it learns something new; none of them
//! knows about probing.
//!
//! [`PeerSet`]: crate::peers::PeerSet

pub mod cgroup;
pub mod dns;
pub mod ebpf;
pub mod skeleton;
pub mod sockdiag;
pub mod static_peers;
pub mod tor_mesh;
pub mod traffic;
