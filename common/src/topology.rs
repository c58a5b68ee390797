//! The topology vocabulary (node, NIC, host, ToR, spine, pod, tenant, plus
//! traced router hops and ECMP links) and the probe path model.
//!
//! Exporters publish their [`Identity`] as `skeletonhunter_node_info`, the
//! localizer joins probe pairs to it, and the offline analyzer reads the same
//! identities from the SkeletonHunter CSV. Keeping the vocabulary and the path
//! model here means the three can never disagree on which components a probe
//! crosses.

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

crate::labelled_enum! {
    without_all;
    /// A kind of topology element, as used in metric labels, alerts and the
    /// `analyze` JSON.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Kind {
        /// A training container / rank endpoint.
        Node,
        /// The host port / RNIC the container uses.
        Nic,
        /// The physical host (its underlay side: the machine and its
        /// uplinks; the overlay side is [`Kind::Vswitch`]).
        Host,
        /// Top-of-rack / access switch.
        Tor,
        /// Aggregation block above the ToR.
        Spine,
        /// Network pod.
        Pod,
        /// The job / tenant: a grouping, not a network component.
        Tenant,
        /// A router hop learned by path tracing (`skeletonhunter_path_hop_info`);
        /// its id is the router's address. Not an [`Identity`] field, so it is
        /// left out of [`Kind::ALL`] (which fixes the node_info label set).
        Hop,
        /// A directed link learned from per-path traces (the `path` label of
        /// `skeletonhunter_path_hop_info`), named by the address of the
        /// interface it enters: the address the router beyond it answered from
        /// when routers answer from their ingress interface. Blamed only when
        /// flows of the same pairs through it fail and flows avoiding it do
        /// not (an ECMP member link). Like [`Kind::Hop`], not an identity field.
        Link,
        /// A container's virtual port (veth or SR-IOV VF) on the overlay,
        /// named by the container's node id: blamed when the container's
        /// overlay probes fail and its host's underlay probes do not.
        Vport,
        /// A host's virtual switch and tunnel endpoint on the overlay,
        /// named by the host's id: blamed when a host's containers fail
        /// on the overlay and the host is clean on the underlay.
        Vswitch,
    }
}

crate::labelled_enum! {
    parse "plane";
    /// Which network a probe measured: the containers' virtual network
    /// (container to container, through virtual ports, the hosts' virtual
    /// switches and tunnels) or the physical one under it (host or RNIC to
    /// host or RNIC, through NICs, ToRs and spines). The same fault reads
    /// differently on each, and which one shows it says which team owns it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Plane {
        /// Container to container.
        Overlay,
        /// Host (or RNIC) to host.
        Underlay,
    }
}

impl Plane {
    /// The plane an endpoint's probes measure, from its identity: a host's
    /// own endpoint (its node id is its host's or its NIC's, as a per-host
    /// exporter names itself) probes the underlay; a container's (a node
    /// of its own on the host) the overlay.
    pub fn of(id: &Identity) -> Plane {
        let own = |other: &str| !other.is_empty() && id.node == other;
        if own(&id.host) || own(&id.nic) {
            Plane::Underlay
        } else {
            Plane::Overlay
        }
    }

    /// The overlay component that stands for `kind`'s overlay side:
    /// a container's virtual port for the container, its host's virtual
    /// switch for the NIC or host. `None` for the fabric (ToR, spine,
    /// links), which only the underlay has.
    pub fn overlay_side(kind: Kind) -> Option<Kind> {
        match kind {
            Kind::Node | Kind::Vport => Some(Kind::Vport),
            Kind::Nic | Kind::Host | Kind::Vswitch => Some(Kind::Vswitch),
            _ => None,
        }
    }
}

impl Kind {
    /// Every identity kind, in path order (nearest the endpoint first);
    /// [`Kind::Hop`] is not one of them.
    pub const ALL: [Kind; 7] = [
        Kind::Node,
        Kind::Nic,
        Kind::Host,
        Kind::Tor,
        Kind::Spine,
        Kind::Pod,
        Kind::Tenant,
    ];

    /// Every kind a verdict (and so a component alert) can name: the
    /// identity kinds but the tenant (a grouping of pairs, never blamed),
    /// plus traced hops, ECMP links and the overlay components. Runbook
    /// sections exist per kind.
    pub const BLAMABLE: [Kind; 10] = {
        let [node, nic, host, tor, spine, pod, _tenant] = Kind::ALL;
        [
            node,
            nic,
            host,
            tor,
            spine,
            pod,
            Kind::Hop,
            Kind::Link,
            Kind::Vport,
            Kind::Vswitch,
        ]
    };

    /// The name of the label that carries this kind's id on a single-place
    /// series or alert (`skeletonhunter_node_info`, a ToR alert's `tor`).
    /// It is the kind's name except where that name is also a target label
    /// Kubernetes service discovery or prometheus-operator attach (see
    /// [`RESERVED_TARGET_LABELS`]): a target label of the same name would
    /// rename the exposed one to `exported_*`, and the rules would join on
    /// the Kubernetes value. Pair labels (`src_node`, `dst_pod`) keep the
    /// kind's name: they collide with nothing.
    pub fn label_name(self) -> &'static str {
        match self {
            Kind::Node => "node_id",
            Kind::Pod => "network_pod",
            k => k.as_str(),
        }
    }

    /// The suffix of the SkeletonHunter CSV column holding this kind for one
    /// side of a probe: `src_<suffix>` / `dst_<suffix>`. The CSV has no hop
    /// column: `Kind::Hop` and `Kind::Link` give `"hop"` and `"link"`, which
    /// match nothing there.
    pub fn csv_suffix(self) -> &'static str {
        match self {
            Kind::Node => "node_id",
            Kind::Nic => "real_ip",
            Kind::Host => "node_sn",
            Kind::Tor => "asw",
            Kind::Spine => "dsw",
            Kind::Pod => "pod",
            Kind::Tenant => "tenant_id",
            Kind::Hop => "hop",
            Kind::Link => "link",
            Kind::Vport => "vport",
            Kind::Vswitch => "vswitch",
        }
    }

    /// Whether a fault can sit on this kind (tenants and pods are groupings;
    /// the path model does not route through them).
    pub fn is_path_component(self) -> bool {
        matches!(
            self,
            Kind::Node
                | Kind::Nic
                | Kind::Host
                | Kind::Tor
                | Kind::Spine
                | Kind::Hop
                | Kind::Link
                | Kind::Vport
                | Kind::Vswitch
        )
    }
}

/// Error for an unknown kind name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown topology kind {:?} (expected one of {})",
            self.0,
            Kind::LABELS.join(", ")
        )
    }
}

impl std::error::Error for UnknownKind {}

impl FromStr for Kind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::from_label(s).ok_or_else(|| UnknownKind(s.to_string()))
    }
}

/// Target labels that Kubernetes service discovery and prometheus-operator
/// attach to every scraped target (`node` where relabelled from the node
/// name). No label SkeletonHunter exposes may take one of these names, or
/// Prometheus renames it to `exported_<name>` and the target's value takes
/// its place.
pub const RESERVED_TARGET_LABELS: [&str; 8] = [
    "pod",
    "namespace",
    "container",
    "node",
    "service",
    "endpoint",
    "instance",
    "job",
];

/// One topology element: a kind and its id (`tor` + the switch name, ...).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Component {
    /// Which layer of the fabric the element belongs to.
    pub kind: Kind,
    /// Its name within that layer (a node name, a NIC address, a switch name).
    pub id: String,
}

impl Component {
    /// A component of `kind` named `id`.
    pub fn new(kind: Kind, id: impl Into<String>) -> Self {
        Component {
            kind,
            id: id.into(),
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.id)
    }
}

/// Where an endpoint sits in the fabric. Empty strings mean "unknown": the
/// component is then simply left out of paths (a missing CSV column or label
/// shrinks the topology instead of failing). Its fields, in order, are the
/// label set of `skeletonhunter_node_info`, named by [`Kind::label_name`]
/// (the field names are the configuration keys).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Identity {
    /// The container / rank endpoint itself.
    pub node: String,
    /// The host port (RNIC) the endpoint sends through, usually its address.
    pub nic: String,
    /// The physical host, whose virtual switch joins its containers.
    pub host: String,
    /// The top-of-rack switch the host's NIC is cabled to.
    pub tor: String,
    /// The aggregation switch above the ToR.
    pub spine: String,
    /// The network pod the ToR belongs to (a grouping, not on the path).
    pub pod: String,
    /// The job / tenant the endpoint runs for (a grouping, not on the path).
    pub tenant: String,
}

impl Identity {
    /// The id for `kind` ("" when unknown, and always for `Kind::Hop` and
    /// `Kind::Link`, which are not part of an identity). An overlay
    /// component is named by what it serves: a virtual port by its
    /// container's node id, a virtual switch by its host's id.
    pub fn get(&self, kind: Kind) -> &str {
        match kind {
            Kind::Node => &self.node,
            Kind::Nic => &self.nic,
            Kind::Host => &self.host,
            Kind::Tor => &self.tor,
            Kind::Spine => &self.spine,
            Kind::Pod => &self.pod,
            Kind::Tenant => &self.tenant,
            // The overlay side of the container and of its host.
            Kind::Vport => &self.node,
            Kind::Vswitch => &self.host,
            Kind::Hop | Kind::Link => "",
        }
    }

    /// Set the field for `kind`, for parsers that fill an identity by kind.
    /// `Kind::Hop`, `Kind::Link` and the overlay kinds have no field of
    /// their own in an identity and are ignored (parsers iterate [`Kind::ALL`], which never yields them).
    pub fn set(&mut self, kind: Kind, value: impl Into<String>) {
        let slot = match kind {
            Kind::Node => &mut self.node,
            Kind::Nic => &mut self.nic,
            Kind::Host => &mut self.host,
            Kind::Tor => &mut self.tor,
            Kind::Spine => &mut self.spine,
            Kind::Pod => &mut self.pod,
            Kind::Tenant => &mut self.tenant,
            Kind::Hop | Kind::Link | Kind::Vport | Kind::Vswitch => return,
        };
        *slot = value.into();
    }

    /// `(label name, value)` pairs in the order of `skeletonhunter_node_info`.
    pub fn labels(&self) -> [(&'static str, &str); Kind::ALL.len()] {
        Kind::ALL.map(|k| (k.label_name(), self.get(k)))
    }
}

/// `skeletonhunter_node_info`'s label set: [`Identity::labels`].
impl EncodeLabelSet for Identity {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        self.labels().as_slice().encode(encoder)
    }
}

crate::labelled_enum! {
    /// How far apart two endpoints are; latency baselines are kept per class
    /// because a same-host RTT and a cross-spine RTT are not comparable.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum PathClass {
        /// Both endpoints on one host: only the host's virtual switch is crossed.
        SameHost,
        /// Different hosts under one ToR.
        SameTor,
        /// Different ToRs (or unknown placement): the spine layer is crossed.
        CrossTor,
    }
}

/// The class of the path between `a` and `b` (unknown hosts or ToRs compare
/// as different, the conservative choice).
pub fn path_class(a: &Identity, b: &Identity) -> PathClass {
    if !a.host.is_empty() && a.host == b.host {
        PathClass::SameHost
    } else if !a.tor.is_empty() && a.tor == b.tor {
        PathClass::SameTor
    } else {
        PathClass::CrossTor
    }
}

/// The components a probe from `a` to `b` crosses, in the order it crosses
/// them. The path model: a probe leaves endpoint `a` through its NIC into its
/// host's virtual switch. Between two containers of one host it goes no
/// further before turning to `b`; between hosts under one ToR it also crosses
/// that ToR; between ToRs it climbs `a`'s ToR to `a`'s spine, crosses to
/// `b`'s spine (the same one in a single-spine fabric) and comes down `b`'s
/// ToR. It then enters `b`'s host, NIC and `b` itself. Pods and tenants are
/// groupings and never on the path. Unknown (empty) ids are skipped, and a
/// component shared by both sides (one spine, one host) appears once.
pub fn path(a: &Identity, b: &Identity) -> Vec<Component> {
    path_ids(a, b)
        .into_iter()
        .map(|(kind, id)| Component::new(kind, id))
        .collect()
}

/// [`path`] as borrowed (kind, id) pairs: what a caller counting over
/// every pair of a large fabric needs without a string copy per component.
pub fn path_ids<'a>(a: &'a Identity, b: &'a Identity) -> Vec<(Kind, &'a str)> {
    let mut out: Vec<(Kind, &str)> = Vec::with_capacity(10);
    let mut push = |kind: Kind, id: &'a str| {
        if !id.is_empty() && !out.iter().any(|&(k, i)| k == kind && i == id) {
            out.push((kind, id));
        }
    };
    push(Kind::Node, &a.node);
    push(Kind::Nic, &a.nic);
    push(Kind::Host, &a.host);
    match path_class(a, b) {
        PathClass::SameHost => {}
        PathClass::SameTor => push(Kind::Tor, &a.tor),
        PathClass::CrossTor => {
            push(Kind::Tor, &a.tor);
            push(Kind::Spine, &a.spine);
            push(Kind::Spine, &b.spine);
            push(Kind::Tor, &b.tor);
        }
    }
    push(Kind::Host, &b.host);
    push(Kind::Nic, &b.nic);
    push(Kind::Node, &b.node);
    out
}

/// Whether a probe from `a` to `b` crosses component `(kind, id)`: the
/// same answer as `path_ids(a, b).contains(&(kind, id))`, without building
/// the path, for a caller asking it of every pair of a large fabric.
pub fn crosses(a: &Identity, b: &Identity, kind: Kind, id: &str) -> bool {
    if id.is_empty() {
        return false;
    }
    let either = |f: fn(&Identity) -> &str| f(a) == id || f(b) == id;
    match kind {
        Kind::Node | Kind::Vport => either(|i| &i.node),
        Kind::Nic => either(|i| &i.nic),
        // A host's virtual switch carries its containers' overlay probes,
        // between themselves too.
        Kind::Host | Kind::Vswitch => either(|i| &i.host),
        Kind::Tor => match path_class(a, b) {
            PathClass::SameHost => false,
            PathClass::SameTor => a.tor == id,
            PathClass::CrossTor => either(|i| &i.tor),
        },
        Kind::Spine => path_class(a, b) == PathClass::CrossTor && either(|i| &i.spine),
        Kind::Hop | Kind::Link | Kind::Pod | Kind::Tenant => false,
    }
}

#[cfg(test)]
mod tests;
