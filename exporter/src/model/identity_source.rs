//! Where each field of this exporter's identity came from: shown by
//! `--check-config` and exported as `skeletonhunter_identity_source`, so a
//! host missing from the topology map is visible, not just an empty label.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// The origin of one identity field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdentitySource {
    /// `identity.<field>` in the configuration file.
    ConfigFile,
    /// `--<field>` or `SKELETONHUNTER_<FIELD>` (non-empty).
    FlagOrEnv,
    /// This host's entry in `identity.topology_file`.
    TopologyFile,
    /// The host default (hostname; the default route's source address).
    Default,
    /// Empty, and a topology file is configured but has no entry for
    /// this host.
    Missing,
    /// Empty, and nothing was meant to set it.
    Unset,
}

impl IdentitySource {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            IdentitySource::ConfigFile => "config_file",
            IdentitySource::FlagOrEnv => "flag_or_env",
            IdentitySource::TopologyFile => "topology_file",
            IdentitySource::Default => "default",
            IdentitySource::Missing => "missing",
            IdentitySource::Unset => "unset",
        }
    }
}

impl EncodeLabelValue for IdentitySource {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}
