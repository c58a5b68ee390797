//! Configuration: YAML file, then environment, then flags (each overrides
//! the one before). Environment names follow the Kubernetes downward-API
//! style (`SKELETONHUNTER_NODE` from `metadata.name`, `SKELETONHUNTER_HOST`
//! from `spec.nodeName`, ...). Every error names the key and the problem.
//!
//! Layout: [`args`] (flags), [`file`] (the YAML schema), [`identity`]
//! (identity fields and their origin) with [`topology`] (the host-to-ToR
//! map file), [`traffic`] (the
//! traffic-discovery section), [`ecmp`] (flows per peer and the
//! coverage formula), [`settings`] (the validated [`Config`]),
//! `merge` (file + flags to [`Config`], one function per section),
//! [`error`]. May use `model/`, `sys/` and `wire/`; never the modules it
//! configures.

pub mod args;
pub mod containers;
pub mod ecmp;
pub mod error;
pub mod file;
pub mod identity;
mod kinds;
mod merge;
mod server;
pub mod settings;
mod summary;
#[cfg(test)]
mod tests;
pub mod topology;
pub mod traffic;
pub mod validate;

pub use args::Args;
pub use containers::ContainerSettings;
pub use ecmp::FlowSettings;
pub use error::{ConfigError, ListFileError};
pub use file::{parse_file, parse_mesh_list, read_mesh_list, FileConfig, MeshEntry};
pub use identity::default_route_address;
pub use identity::{IdentityOrigin, TopologyLookup};
pub use server::http_connection_cap;
pub use settings::{
    Config, DnsSource, ResponderPolicy, TorMesh, DEFAULT_LISTEN, DEFAULT_RESPONDER_RATE,
    DEFAULT_TCP_PORT, DEFAULT_UDP_PORT,
};
pub use traffic::{CgroupEntry, DurationStr, EbpfSection, Mode, TrafficConfig, TrafficSettings};
