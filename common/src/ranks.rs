//! Where a training container sits in its job's rank order: the contract
//! between the exporter, which reads it from the launcher's variables in
//! the container's processes and publishes it as
//! `skeletonhunter_rank_info` (one series per container, never a label on
//! the probe series), and the localizer, which counts the ranks a fault
//! hurts in it and lists each job's containers by rank.

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use std::fmt;

/// The info series' name.
pub const RANK_INFO: &str = "skeletonhunter_rank_info";

/// Most ranks a job may have: a launcher's variable above this is not
/// believed (the largest jobs today are ~100k GPUs).
pub const MAX_WORLD: u32 = 1 << 22;

/// A container's ranks: `first..first + count` of a job of `world`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ranks {
    /// Its lowest global rank.
    pub first: u32,
    /// How many ranks it holds (one process per GPU), at least 1.
    pub count: u32,
    /// The job's ranks in all, when the launcher says.
    pub world: Option<u32>,
}

impl Ranks {
    /// Checked: `count ≥ 1`, the last rank below `world` (when known), all
    /// within [`MAX_WORLD`]. `None` for values no launcher sets.
    pub fn new(first: u32, count: u32, world: Option<u32>) -> Option<Ranks> {
        let end = first.checked_add(count)?;
        let fits =
            count >= 1 && end <= MAX_WORLD && world.is_none_or(|w| end <= w && w <= MAX_WORLD);
        fits.then_some(Ranks {
            first,
            count,
            world,
        })
    }

    /// Read back from the info series' labels (`first_rank`, `ranks`,
    /// `world_size`, the last empty when unknown); `None` if they are not
    /// what [`RankInfo`] writes.
    pub fn from_labels(first: &str, count: &str, world: &str) -> Option<Ranks> {
        let world = match world {
            "" => None,
            w => Some(w.parse().ok()?),
        };
        Ranks::new(first.parse().ok()?, count.parse().ok()?, world)
    }

    /// `"8-15"`, or `"8"` for one rank: how an operator names them.
    pub fn span(&self) -> String {
        match self.count {
            1 => self.first.to_string(),
            n => format!("{}-{}", self.first, self.first + n - 1),
        }
    }
}

/// The label set of one container's `skeletonhunter_rank_info`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RankInfo {
    /// The container's node id (joins `skeletonhunter_node_info`).
    pub node: String,
    /// Its ranks.
    pub ranks: Ranks,
}

impl EncodeLabelSet for RankInfo {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        let world = self.ranks.world.map(|w| w.to_string()).unwrap_or_default();
        [
            ("node_id", self.node.clone()),
            ("first_rank", self.ranks.first.to_string()),
            ("ranks", self.ranks.count.to_string()),
            ("world_size", world),
        ]
        .as_slice()
        .encode(encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_checked_and_read_back_from_their_labels() {
        let r = Ranks::new(8, 8, Some(64)).unwrap();
        assert_eq!(r.span(), "8-15");
        assert_eq!(Ranks::from_labels("8", "8", "64"), Some(r));
        assert_eq!(
            Ranks::from_labels("3", "1", "").map(|r| r.span()),
            Some("3".into())
        );
        assert_eq!(Ranks::new(60, 8, Some(64)), None, "past the job's end");
        assert_eq!(Ranks::new(0, 0, None), None, "no rank");
        assert_eq!(Ranks::new(u32::MAX, 2, None), None, "overflow");
        assert_eq!(Ranks::from_labels("x", "1", ""), None);
        assert_eq!(Ranks::from_labels("0", "1", "-4"), None);
    }

    #[test]
    fn the_info_series_names_the_node_and_its_ranks() {
        use prometheus_client::metrics::{family::Family, gauge::Gauge};
        let mut reg = prometheus_client::registry::Registry::default();
        let f: Family<RankInfo, Gauge> = Family::default();
        reg.register(RANK_INFO, "x", f.clone());
        let info = RankInfo {
            node: "llama-3".into(),
            ranks: Ranks::new(24, 8, None).unwrap(),
        };
        f.get_or_create(&info).set(1);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(
            text.contains(
                "skeletonhunter_rank_info{node_id=\"llama-3\",first_rank=\"24\",ranks=\"8\",world_size=\"\"} 1"
            ),
            "{text}"
        );
    }
}
