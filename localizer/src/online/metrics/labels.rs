//! The label sets of the served series, and the enums whose fixed text
//! is a label value.

use crate::clients::prometheus::QueryFailure;
use crate::input::histograms::RttForm;
use crate::input::promql::QueryKind;
use crate::online::overview::Scope;
use prometheus_client::encoding::EncodeLabelSet;

skeletonhunter_common::labelled_enum! {
    /// How a cycle ended: the `result` label of
    /// `skeletonhunter_localizer_cycles_total`.
    #[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
    pub enum CycleResult {
        /// The data was complete and analyzed.
        Ok,
        /// A query failed or came back partial.
        QueryFailed,
        /// The queries answered, but nothing could be analyzed.
        NoData,
    }
}

/// Labels of the blame series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ComponentLabels {
    /// The component's kind (`tor`, `node`, ...).
    pub kind: String,
    /// The component's id.
    pub id: String,
}

/// Labels of `skeletonhunter_localizer_job_impact_ranks`: one job touched
/// by one alerting component, and which count (`scope`: `under`, the ranks
/// placed beneath it; `hit`, the ranks whose skeleton pairs cross it;
/// `all`, the job's ranks).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobImpactLabels {
    /// The component's kind.
    pub kind: String,
    /// The component's id.
    pub id: String,
    /// The job: its `tenant` (never `job`, Prometheus' own target label).
    pub tenant: String,
    /// `under`, `hit` or `all`.
    pub scope: &'static str,
}

/// Labels of `skeletonhunter_localizer_job_layout`: one series per job
/// whose groups are solved, with its grid.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLayoutLabels {
    /// The job: its `tenant`.
    pub tenant: String,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Pipeline stages.
    pub pp: u32,
    /// `true` when no layout with other groups fits as well.
    pub determined: &'static str,
}

/// Labels of `skeletonhunter_component_alerting`: one series per alert the
/// localizer holds firing, with its identity.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AlertLabels {
    /// The component's kind.
    pub kind: String,
    /// The component's id.
    pub id: String,
    /// The symptom the alert fired with.
    pub symptom: String,
    /// `critical` or `warning`.
    pub severity: String,
}

/// Labels of `skeletonhunter_localizer_query_errors_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueryLabels {
    /// Which of the cycle's queries (`sent`, `lost`, `topology_now`, ...).
    pub query: QueryKind,
    /// `unreachable`, `http_status`, `api_error`, `decode`, `partial`,
    /// `too_large`.
    pub reason: QueryFailure,
}

/// Labels of `skeletonhunter_localizer_query_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueryKindLabels {
    /// Which of the cycle's queries.
    pub query: QueryKind,
}

/// Labels of `skeletonhunter_localizer_histograms_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HistogramsLabels {
    /// `classic`, `native` or `native_or_classic`.
    pub mode: RttForm,
}

/// Labels of `skeletonhunter_localizer_cycles_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok`, `query_failed`, `no_data`.
    pub result: CycleResult,
}

/// Labels of `skeletonhunter_localizer_pair_reads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PairReadLabels {
    /// `all` (every pair) or `shard` (one of `--pair-shards`).
    pub read: &'static str,
}

/// Labels of the per-Alertmanager series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AlertmanagerLabels {
    /// The Alertmanager root URL.
    pub alertmanager: String,
}

/// Labels of `skeletonhunter_overview_loss_ratio`: an area of the overview.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AreaLabels {
    /// `fabric`, `tor`, `spine` or `tenant`.
    pub scope: Scope,
    /// The ToR, spine or tenant ("" for the fabric).
    pub id: String,
}

/// Labels of `skeletonhunter_overview_pairs`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AreaPairsLabels {
    /// As [`AreaLabels::scope`].
    pub scope: Scope,
    /// As [`AreaLabels::id`].
    pub id: String,
    /// `all` or `unreachable`.
    pub state: &'static str,
}

/// Labels of `skeletonhunter_overview_pair_rtt_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AreaQuantileLabels {
    /// As [`AreaLabels::scope`].
    pub scope: Scope,
    /// As [`AreaLabels::id`].
    pub id: String,
    /// `0.5` or `0.99`.
    pub quantile: String,
}

/// Labels of `skeletonhunter_overview_pairs_by_rtt`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeLabels {
    /// The upper bound in seconds (`+Inf` last), as Prometheus writes it.
    pub le: String,
}

/// Labels of the worst-pair series: the pair and where its ends sit.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorstPairLabels {
    /// The prober's node.
    pub src_node: String,
    /// The responder's node.
    pub dst_node: String,
    /// The prober's ToR.
    pub src_tor: String,
    /// The responder's ToR.
    pub dst_tor: String,
    /// The tenant both ends are in ("" when they differ).
    pub tenant: String,
}
