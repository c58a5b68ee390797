//! Which histogram representation the exporter serves (`metrics.histograms`).

use skeletonhunter_common::label::UnknownLabel;

skeletonhunter_common::labelled_enum! {
    /// The histogram representation of the RTT and delay histograms.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum HistogramMode {
        /// 24 classic buckets (25 `_bucket` series with `+Inf`) in every
        /// format: what servers without native histograms and the shipped
        /// rules read.
        Classic,
        /// Native (sparse exponential) buckets only. The protobuf exposition
        /// carries them; text formats, which cannot, show the histogram with
        /// its `+Inf` bucket, `_sum` and `_count` only.
        Native,
        /// Both: native buckets in protobuf, classic buckets in every format
        /// (a native-enabled Prometheus keeps the native ones only; a text
        /// scrape is what `Classic` serves, byte for byte). The default.
        #[default]
        Both,
    }
}

impl HistogramMode {
    /// Whether classic buckets are kept.
    pub fn classic(self) -> bool {
        self != HistogramMode::Native
    }

    /// Whether native buckets are kept.
    pub fn native(self) -> bool {
        self != HistogramMode::Classic
    }
}

/// A `metrics.histograms` value that is none of [`HistogramMode::ALL`].
pub type UnknownHistogramMode = UnknownLabel;

/// A YAML value may come with white space around it.
impl std::str::FromStr for HistogramMode {
    type Err = UnknownHistogramMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HistogramMode::from_label(s.trim()).ok_or_else(|| UnknownLabel {
            what: "histogram mode",
            given: s.to_string(),
            accepted: &HistogramMode::LABELS,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_and_refuse_others() {
        for m in HistogramMode::ALL {
            assert_eq!(m.as_str().parse::<HistogramMode>(), Ok(m));
        }
        assert_eq!(HistogramMode::default(), HistogramMode::Both);
        assert!("sparse".parse::<HistogramMode>().is_err());
        assert!(HistogramMode::Both.classic() && HistogramMode::Both.native());
        assert!(!HistogramMode::Native.classic());
    }
}
