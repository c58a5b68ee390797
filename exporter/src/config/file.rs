//! The YAML configuration file as written: strings and options, checked
//! for unknown keys by serde and validated into [`super::Config`] by the
//! merge.

use super::error::{ConfigError, ListFileError};
use super::kinds::{deserialize_section, keys};
use super::traffic::EbpfSection;
use serde::{Deserialize, Deserializer};
use skeletonhunter_common::yaml::from_str_or_default;
use skeletonhunter_common::{Identity, Kind};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The YAML file as written; strings are validated into [`Config`].
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    /// `listen`: the `/metrics` address.
    pub listen: Option<String>,
    /// `identity`: this exporter's topology labels.
    pub identity: FileIdentity,
    /// `responder`: where peers' probes are answered.
    pub responder: FileResponder,
    /// `probe`: how peers are probed.
    pub probe: FileProbe,
    /// Where peers come from (`peers` is accepted as an older name).
    #[serde(alias = "peers")]
    pub discovery: FileDiscovery,
    /// `metrics`: how `/metrics` represents histograms.
    pub metrics: FileMetrics,
    /// `containers`: the containers on this host to probe from.
    pub containers: super::containers::FileContainers,
}

/// `metrics:` the exposition's shape.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileMetrics {
    /// `classic`, `native` or `both` (the default) (docs/exporter.md, "Series budget").
    pub histograms: Option<String>,
}

/// `identity:` (the topology vocabulary of docs/exporter.md, one key per
/// [`Kind`]; unknown keys are errors, so a typo like `rack:` does not
/// silently leave `tor` empty).
#[derive(Debug, Default)]
pub struct FileIdentity {
    /// The ids given (empty: not given here).
    pub id: Identity,
    /// A YAML map from host name to `tor`, `spine`, `pod`, `tenant`, `nic`
    /// that fills the fields left empty (see `super::topology`).
    pub topology_file: Option<PathBuf>,
}

/// The keys of `identity:`: every kind's name, then `topology_file`.
const IDENTITY_KEYS: [&str; Kind::ALL.len() + 1] = keys(&Kind::ALL, &["topology_file"]);

impl<'de> Deserialize<'de> for FileIdentity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let what = "the identity fields (node, nic, host, tor, ...)";
        let (id, topology_file) = deserialize_section(d, what, &IDENTITY_KEYS, &Kind::ALL)?;
        Ok(FileIdentity { id, topology_file })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// `responder:` bind addresses (`off` disables one) and whom the UDP echo
/// responder answers.
pub struct FileResponder {
    /// UDP echo responder address.
    pub udp: Option<String>,
    /// TCP dial acceptor address.
    pub tcp: Option<String>,
    /// Source networks answered (CIDRs); with `allow_peers`, either suffices.
    pub allow: Vec<String>,
    /// Answer the current peers (every discovery source).
    pub allow_peers: bool,
    /// Requests per second answered per source address (0: no limit).
    pub rate_limit: Option<u32>,
    /// How long to go on answering, replies marked leaving, when stopping.
    pub departure_notice: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// `probe:` timing, protocols, ports and request size.
pub struct FileProbe {
    /// Probe interval per peer and protocol.
    pub interval: Option<String>,
    /// Time after which a probe counts as lost.
    pub timeout: Option<String>,
    /// Protocols to probe with.
    pub protocols: Option<Vec<String>>,
    /// Default UDP echo port of peers.
    pub udp_port: Option<u16>,
    /// Default TCP dial port of peers.
    pub tcp_port: Option<u16>,
    /// Size of UDP echo requests in bytes.
    pub udp_size: Option<usize>,
    /// Equal-cost paths between two ToRs (sets the default `flows`).
    pub ecmp_width: Option<u32>,
    /// UDP flows (source ports) each peer is probed over.
    pub flows: Option<u32>,
    /// Window of the per-flow and per-path loss ratios.
    pub flow_window: Option<String>,
    /// Path traces per minute that map flows to paths (0: off).
    pub flow_traces_per_minute: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// `discovery:` the peer sources.
pub struct FileDiscovery {
    #[serde(rename = "static")]
    /// Static peers.
    pub static_peers: Vec<FilePeer>,
    /// Headless-service names to resolve.
    pub dns: Vec<FileDns>,
    /// ToR-mesh peer list.
    pub tor_mesh: Option<FileTorMesh>,
    /// Traffic discovery (eBPF, with /proc polling fallback); `false`
    /// turns it off. See docs/discovery.md.
    pub ebpf: EbpfSection,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(default, deny_unknown_fields)]
/// One static peer.
pub struct FilePeer {
    /// Its address.
    pub address: String,
    /// Its node name, if known.
    pub name: Option<String>,
    /// Its UDP echo port, if not the default.
    pub udp_port: Option<u16>,
    /// Its TCP dial port, if not the default.
    pub tcp_port: Option<u16>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// One DNS source.
pub struct FileDns {
    /// The name to resolve.
    pub name: String,
    /// `a` (A/AAAA, the default) or `srv`.
    pub record: Option<String>,
    /// How often to resolve it (default 30s).
    pub refresh: Option<String>,
    /// Resolver to ask (`IP:PORT`); default: /etc/resolv.conf.
    pub nameserver: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
/// `discovery.tor_mesh`.
pub struct FileTorMesh {
    /// A YAML file: a list of entries with `address`, `tor`, optional `node`
    /// and ports. Re-read every `refresh`.
    pub file: Option<PathBuf>,
    /// Or an inline list.
    pub peers: Vec<MeshEntry>,
    /// How often to re-read the file (default 30s).
    pub refresh: Option<String>,
}

/// One entry of a ToR-mesh peer list.
#[derive(Debug, Default, Deserialize, Clone, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct MeshEntry {
    /// The peer's address.
    pub address: String,
    /// Its top-of-rack switch: only same-ToR entries are peers.
    pub tor: String,
    /// Its node name, if known.
    pub node: Option<String>,
    /// Its UDP echo port, if not the default.
    pub udp_port: Option<u16>,
    /// Its TCP dial port, if not the default.
    pub tcp_port: Option<u16>,
}

/// Parse the YAML text (errors carry the YAML path and line).
pub fn parse_file(text: &str) -> Result<FileConfig, ConfigError> {
    from_str_or_default(text).map_err(|e| ConfigError::Yaml(e.to_string()))
}

/// The largest file the exporter reads besides its config (a topology map
/// or ToR-mesh peer list of a whole fabric fits many times over).
pub const MAX_LIST_FILE_BYTES: u64 = 16 << 20;

/// Read the list file `what` at `path`, at most [`MAX_LIST_FILE_BYTES`]
/// of it, and `parse` its text.
pub fn read_list_file<T>(
    what: &'static str,
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, ListFileError> {
    let read_err = |source| ListFileError::Read {
        what,
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(read_err)?
        .take(MAX_LIST_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    if text.len() as u64 > MAX_LIST_FILE_BYTES {
        return Err(ListFileError::TooLarge {
            what,
            path: path.to_path_buf(),
            max_bytes: MAX_LIST_FILE_BYTES,
        });
    }
    parse(&text).map_err(|message| ListFileError::Parse {
        what,
        path: path.to_path_buf(),
        message,
    })
}

/// Read and parse a ToR-mesh peer list file (a YAML list of entries; an
/// empty file is an empty list): at load, where a failure refuses the
/// configuration, and at every refresh, where it keeps the last list.
pub fn read_mesh_list(path: &Path) -> Result<Vec<MeshEntry>, ListFileError> {
    read_list_file("ToR-mesh peer list", path, parse_mesh_list)
}

/// Parse a ToR-mesh peer list: a YAML list of entries (empty text: none).
pub fn parse_mesh_list(text: &str) -> Result<Vec<MeshEntry>, String> {
    from_str_or_default(text).map_err(|e| e.to_string())
}
