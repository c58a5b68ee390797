//! Splitting the per-pair queries by source node (`--pair-shards`), so a
//! cycle reads a part of the pairs and reuses the rest from the cycles
//! before. At scale the store's cost is the series a cycle reads, and a
//! pair's series change only once per scrape: reading each pair once per
//! scrape interval instead of once per cycle divides that cost.
//!
//! A shard is a set of name endings (the last one or two characters of
//! `src_node`, letters and digits only), so its matcher is a short regex
//! whatever the node count. The last shard is everything the others do not
//! match, so every series falls in exactly one shard, a node that appeared
//! after the split included.

use std::collections::{BTreeMap, HashMap};

/// Which shard each source node's series belong to, and the matcher that
/// selects a shard's series in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// Characters of a name's ending (1 or 2).
    width: usize,
    /// Ending -> shard, for every shard but the last.
    endings: HashMap<String, usize>,
    /// Number of shards (at least 1).
    shards: usize,
}

/// How many distinct endings per shard are enough for an even split with
/// one character; fewer, and two characters are tried.
const ENDINGS_PER_SHARD: usize = 4;

impl Partition {
    /// At most `shards` shards of about equal node counts over `names`.
    /// Fewer when the names have fewer distinct endings than that.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>, shards: usize) -> Partition {
        let names: Vec<&str> = names.into_iter().collect();
        let shards = shards.max(1);
        let mut counted = count_endings(&names, 1);
        if counted.0.len() < ENDINGS_PER_SHARD * shards {
            let wider = count_endings(&names, 2);
            if wider.0.len() > counted.0.len() {
                counted = wider;
            }
        }
        let (counts, width, other) = counted;
        let shards = shards.min(counts.len() + usize::from(other > 0)).max(1);
        // Largest first onto the lightest shard; names without an ending
        // load the last shard, which takes whatever is not listed.
        let mut by_size: Vec<(&String, &usize)> = counts.iter().collect();
        by_size.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut load = vec![0usize; shards];
        load[shards - 1] = other;
        let mut endings = HashMap::new();
        for (ending, n) in by_size {
            let lightest = (0..shards).min_by_key(|&i| (load[i], i)).unwrap_or(0);
            load[lightest] += n;
            if lightest + 1 < shards {
                endings.insert(ending.clone(), lightest);
            }
        }
        Partition {
            width,
            endings,
            shards,
        }
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The shard of a series whose `src_node` is `node` (the last shard
    /// for a series without one).
    pub fn shard_of(&self, node: Option<&str>) -> usize {
        node.and_then(|n| ending(n, self.width))
            .and_then(|e| self.endings.get(e))
            .copied()
            .unwrap_or(self.shards - 1)
    }

    /// The label matcher selecting shard `shard`'s series; `None` when there
    /// is one shard (everything).
    pub fn matcher(&self, shard: usize) -> Option<String> {
        if self.shards <= 1 {
            return None;
        }
        let listed = |keep: &dyn Fn(usize) -> bool| {
            let mut e: Vec<&str> = self
                .endings
                .iter()
                .filter(|(_, s)| keep(**s))
                .map(|(e, _)| e.as_str())
                .collect();
            e.sort_unstable();
            // Endings are letters and digits: nothing to escape.
            format!("(?s:.*)(?:{})", e.join("|"))
        };
        Some(if shard + 1 < self.shards {
            format!("src_node=~\"{}\"", listed(&|s| s == shard))
        } else {
            format!("src_node!~\"{}\"", listed(&|_| true))
        })
    }
}

/// Node count by ending of `width` characters, the width, and the count of
/// names without such an ending.
fn count_endings(names: &[&str], width: usize) -> (BTreeMap<String, usize>, usize, usize) {
    let mut counts = BTreeMap::new();
    let mut other = 0;
    for n in names {
        match ending(n, width) {
            Some(e) => *counts.entry(e.to_string()).or_insert(0) += 1,
            None => other += 1,
        }
    }
    (counts, width, other)
}

/// The last `width` characters of `name` when they are ASCII letters or
/// digits.
fn ending(name: &str, width: usize) -> Option<&str> {
    let start = name.len().checked_sub(width)?;
    let e = name.get(start..)?;
    e.bytes().all(|b| b.is_ascii_alphanumeric()).then_some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether Prometheus' matcher `m` (anchored, as the store anchors
    /// label regexes) selects `node`.
    fn selects(m: &str, node: &str) -> bool {
        let (negated, rest) = match m.strip_prefix("src_node!~\"") {
            Some(r) => (true, r),
            None => (
                false,
                m.strip_prefix("src_node=~\"").expect("a src_node matcher"),
            ),
        };
        let re = regex::Regex::new(&format!("^(?:{})$", rest.trim_end_matches('"'))).unwrap();
        re.is_match(node) != negated
    }

    fn names(n: usize, f: impl Fn(usize) -> String) -> Vec<String> {
        (0..n).map(f).collect()
    }

    #[test]
    fn every_node_is_in_exactly_the_shard_whose_matcher_selects_it() {
        let known = names(300, |i| format!("h{i:04}-c{}", i % 8));
        let p = Partition::new(known.iter().map(String::as_str), 3);
        assert_eq!(p.shards(), 3);
        let mut probe: Vec<String> = known.clone();
        probe.extend(["x-", "é", "a\nb3", "", "7", "zz", "new-node-q", "ab_"].map(String::from));
        for node in &probe {
            let selected: Vec<usize> = (0..3)
                .filter(|&s| selects(&p.matcher(s).unwrap(), node))
                .collect();
            assert_eq!(selected, vec![p.shard_of(Some(node))], "node {node:?}");
        }
        assert_eq!(p.shard_of(None), 2);
    }

    #[test]
    fn shards_are_even_for_numbered_names() {
        let known = names(28_672, |i| format!("host{:05}", i));
        let p = Partition::new(known.iter().map(String::as_str), 3);
        let mut load = [0usize; 3];
        for n in &known {
            load[p.shard_of(Some(n))] += 1;
        }
        let (lo, hi) = (load.iter().min().unwrap(), load.iter().max().unwrap());
        assert!(hi - lo <= known.len() / 50, "uneven: {load:?}");
    }

    #[test]
    fn one_shard_reads_everything_and_few_endings_give_fewer_shards() {
        let known = names(100, |i| format!("n{i}"));
        let one = Partition::new(known.iter().map(String::as_str), 1);
        assert_eq!((one.shards(), one.matcher(0)), (1, None));
        let same_end = names(50, |i| format!("gpu{i}-a"));
        let p = Partition::new(same_end.iter().map(String::as_str), 4);
        // Every name ends in "-a" → one ending ("a"; "-a" is not letters).
        assert_eq!(p.shards(), 1);
        let two_kinds: Vec<String> = names(10, |i| format!("{i}-x"))
            .into_iter()
            .chain(names(10, |i| format!("{i}-_")))
            .collect();
        let p = Partition::new(two_kinds.iter().map(String::as_str), 4);
        assert_eq!(p.shards(), 2);
        assert_eq!(p.shard_of(Some("3-x")), 0);
        assert_eq!(p.shard_of(Some("3-_")), 1);
    }

    #[test]
    fn the_same_names_give_the_same_partition() {
        let known = names(1000, |i| format!("c{i}"));
        let mut shuffled = known.clone();
        shuffled.reverse();
        assert_eq!(
            Partition::new(known.iter().map(String::as_str), 4),
            Partition::new(shuffled.iter().map(String::as_str), 4)
        );
    }
}
