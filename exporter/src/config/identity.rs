//! `identity:` resolved from, in order of precedence: a non-empty flag or
//! environment value, a non-empty `identity.*` in the file, this host's
//! entry in the topology map (`identity.topology_file`, which fills only
//! what is still empty), and host defaults. An empty flag or environment
//! value counts as not given, so a downward-API variable whose pod label
//! is absent does not blank the map's value. Each field remembers where it
//! came from ([`IdentityOrigin`]).

use super::args::Args;
use super::error::ConfigError;
use super::file::FileIdentity;
use super::topology::{read_topology, MAP_FIELDS};
use crate::model::IdentitySource;
use crate::sys::host::hostname;
use crate::sys::sock::route_source;
use crate::wire::probe::MAX_LABEL_LEN;
use skeletonhunter_common::{Identity, Kind};
use std::net::SocketAddr;
use std::path::PathBuf;

/// The source address the kernel would use for the default route (no
/// packet is sent). Empty when there is no route.
pub fn default_route_address() -> String {
    // A TEST-NET-2 address: connect() only does a route lookup.
    route_source(SocketAddr::from(([198, 51, 100, 1], 9)))
        .map(|a| a.to_string())
        .unwrap_or_default()
}

/// Fields a reload applies. The others need a restart: `node` is every
/// series' `src_node`, `host` is the map's key, `nic` chooses the RDMA
/// device and the addresses that are never peers.
pub const RELOADABLE: [Kind; 4] = [Kind::Tor, Kind::Spine, Kind::Pod, Kind::Tenant];

/// The topology map lookup made for this identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyLookup {
    /// The map file.
    pub file: PathBuf,
    /// The host looked up (`identity.host`).
    pub host: String,
    /// Whether the map has an entry for it.
    pub found: bool,
    /// `discovery.tor_mesh` is configured but off: it needs the `tor` the
    /// map has not got yet.
    pub tor_mesh_off: bool,
}

/// Where each identity field came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityOrigin {
    /// One per field, in [`Kind::ALL`] order.
    pub sources: Vec<(Kind, IdentitySource)>,
    /// The map lookup, when `identity.topology_file` is set.
    pub topology: Option<TopologyLookup>,
}

impl IdentityOrigin {
    /// Where `kind` came from.
    pub fn source(&self, kind: Kind) -> IdentitySource {
        self.sources
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(IdentitySource::Unset, |(_, s)| *s)
    }

    /// The warning to log when the map has no entry for this host.
    pub fn warning(&self) -> Option<String> {
        let t = self.topology.as_ref().filter(|t| !t.found)?;
        let empty: Vec<&str> = self
            .sources
            .iter()
            .filter(|(_, s)| *s == IdentitySource::Missing)
            .map(|(k, _)| k.as_str())
            .collect();
        let mesh = if t.tor_mesh_off {
            " and discovery.tor_mesh is off"
        } else {
            ""
        };
        Some(format!(
            "topology file {} has no entry for host {:?}; {} stay empty{mesh} (probing goes on) \
             until the file has one and the configuration is reloaded (SIGHUP or POST /-/reload)",
            t.file.display(),
            t.host,
            if empty.is_empty() {
                "no fields".to_string()
            } else {
                empty.join(", ")
            }
        ))
    }
}

fn file_value(fi: &FileIdentity, kind: Kind) -> &str {
    fi.id.get(kind)
}

fn flag_value(args: &Args, kind: Kind) -> Option<&str> {
    match kind {
        Kind::Node => args.node.as_deref(),
        Kind::Nic => args.nic.as_deref(),
        Kind::Host => args.host.as_deref(),
        Kind::Tor => args.tor.as_deref(),
        Kind::Spine => args.spine.as_deref(),
        Kind::Pod => args.pod.as_deref(),
        Kind::Tenant => args.tenant.as_deref(),
        Kind::Hop | Kind::Link | Kind::Vport | Kind::Vswitch => None,
    }
}

/// The identity and where each field came from; reads the topology map
/// when one is configured (its errors name the file and line).
pub(super) fn resolve(
    fi: &FileIdentity,
    args: &Args,
) -> Result<(Identity, IdentityOrigin), ConfigError> {
    let mut id = Identity::default();
    let mut sources = Vec::with_capacity(Kind::ALL.len());
    for kind in Kind::ALL {
        let flag = flag_value(args, kind).map(str::trim).unwrap_or("");
        let file = file_value(fi, kind).trim();
        let (v, s) = if !flag.is_empty() {
            (flag, IdentitySource::FlagOrEnv)
        } else if !file.is_empty() {
            (file, IdentitySource::ConfigFile)
        } else {
            ("", IdentitySource::Unset)
        };
        id.set(kind, v);
        sources.push((kind, s));
    }
    let mut origin = IdentityOrigin {
        sources,
        topology: None,
    };
    fill_default(&mut id, &mut origin, Kind::Node, hostname);
    fill_default(&mut id, &mut origin, Kind::Host, hostname);
    let path = args
        .topology_file
        .clone()
        .or_else(|| fi.topology_file.clone())
        .filter(|p| !p.as_os_str().is_empty());
    if let Some(file) = path {
        let map = read_topology(&file)?;
        let entry = map.hosts.get(&id.host);
        for (kind, source) in &mut origin.sources {
            if !MAP_FIELDS.contains(kind) || !id.get(*kind).is_empty() {
                continue;
            }
            match entry.map(|e| e.get(*kind)).filter(|v| !v.is_empty()) {
                Some(v) => {
                    id.set(*kind, v);
                    *source = IdentitySource::TopologyFile;
                }
                None if entry.is_none() => *source = IdentitySource::Missing,
                None => {}
            }
        }
        origin.topology = Some(TopologyLookup {
            file,
            host: id.host.clone(),
            found: entry.is_some(),
            tor_mesh_off: false,
        });
    }
    fill_default(&mut id, &mut origin, Kind::Nic, default_route_address);
    node_fits_the_wire(&id, &origin)?;
    Ok((id, origin))
}

/// The node name travels in every echo reply, cut to [`MAX_LABEL_LEN`]
/// bytes there: a longer one would label this node one way in its own
/// `node_info` and another in its peers' `dst_node`, which then never join.
/// Refused at start instead, naming where it came from.
fn node_fits_the_wire(id: &Identity, origin: &IdentityOrigin) -> Result<(), ConfigError> {
    let node = id.get(Kind::Node);
    if node.len() <= MAX_LABEL_LEN {
        return Ok(());
    }
    let key = match origin.source(Kind::Node) {
        IdentitySource::FlagOrEnv => "--node (or SKELETONHUNTER_NODE)",
        IdentitySource::ConfigFile => "identity.node",
        _ => "identity.node (from the host name)",
    };
    Err(ConfigError::invalid(
        key,
        format!(
            "the node name is {} bytes; at most {MAX_LABEL_LEN} (the longest a probe reply \
             carries whole, so peers' dst_node matches this node's node_info)",
            node.len()
        ),
    ))
}

/// Give an empty `kind` the host default, when there is one.
fn fill_default(
    id: &mut Identity,
    origin: &mut IdentityOrigin,
    kind: Kind,
    default: fn() -> String,
) {
    if !id.get(kind).is_empty() {
        return;
    }
    let v = default();
    if v.is_empty() {
        return;
    }
    id.set(kind, v);
    if let Some((_, s)) = origin.sources.iter_mut().find(|(k, _)| *k == kind) {
        *s = IdentitySource::Default;
    }
}

/// Whether `old` and `new` differ in a field a reload does not apply.
pub fn restart_fields_differ(old: &Identity, new: &Identity) -> bool {
    Kind::ALL
        .iter()
        .filter(|k| !RELOADABLE.contains(k))
        .any(|k| old.get(*k) != new.get(*k))
}

/// `running` with the reloadable fields (and their origin) of `new`.
pub fn apply_reloadable(
    running: (&Identity, &IdentityOrigin),
    new: (&Identity, &IdentityOrigin),
) -> (Identity, IdentityOrigin) {
    let (mut id, mut origin) = (running.0.clone(), running.1.clone());
    for kind in RELOADABLE {
        id.set(kind, new.0.get(kind));
        if let Some((_, s)) = origin.sources.iter_mut().find(|(k, _)| *k == kind) {
            *s = new.1.source(kind);
        }
    }
    origin.topology = new.1.topology.clone();
    (id, origin)
}
