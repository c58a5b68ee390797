//! Where each field of this exporter's identity came from: shown by
//! `--check-config` and exported as `skeletonhunter_identity_source`, so a
//! host missing from the topology map is visible, not just an empty label.

skeletonhunter_common::labelled_enum! {
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
}
