//! The pair × component path matrix, built from the shared path model
//! (`skeletonhunter_common::topology::path`). Components are interned into
//! column numbers; components crossed by exactly the same set of observed
//! pairs are merged into one column, because no data can tell them apart
//! (they are reported as `equivalent`). Traced router hops of a pair
//! (`PairStats::hops`) join its row as `hop` components.

use crate::engine::model::PairStats;
use skeletonhunter_common::topology::{path_class, path_ids, Component, Kind, PathClass};
use std::collections::HashMap;

/// Sparse 0/1 matrix: rows are pairs, columns are (merged) components.
#[derive(Debug, Clone, Default)]
pub struct PathMatrix {
    /// Representative component of each column.
    pub columns: Vec<Component>,
    /// The other components of each column (same pair set).
    pub equivalent: Vec<Vec<Component>>,
    /// CSR: the columns of pair `i` are `row_cols[row_ptr[i]..row_ptr[i+1]]`.
    pub row_ptr: Vec<u32>,
    /// CSR column indices.
    pub row_cols: Vec<u32>,
    /// CSC: the pairs of column `j` are `col_rows[col_ptr[j]..col_ptr[j+1]]`.
    pub col_ptr: Vec<u32>,
    /// CSC row indices.
    pub col_rows: Vec<u32>,
    /// Path class of each pair (latency baselines are per class).
    pub class: Vec<PathClass>,
}

/// Which of several indistinguishable components to report: the smallest
/// one (node before nic before host before tor before spine). When the
/// evidence fits a small and a large component equally, the small one is
/// the likelier culprit (one container dies more often than a switch) and
/// pages at its own severity; the larger ones are listed as equivalent.
/// A traced hop comes after every label-derived kind: a hop that always
/// co-occurs with a ToR or spine is most likely that switch's own address,
/// and the inventory name is what the operator acts on.
fn report_rank(kind: Kind) -> u8 {
    match kind {
        Kind::Node | Kind::Vport => 0,
        Kind::Nic => 1,
        Kind::Host | Kind::Vswitch => 2,
        Kind::Tor => 3,
        Kind::Spine => 4,
        Kind::Hop => 5,
        Kind::Link => 6,
        Kind::Pod => 7,
        Kind::Tenant => 8,
    }
}

/// Every component on the observed paths, interned, with the (sorted)
/// pairs crossing it, and each pair's path class.
fn intern(pairs: &[&PairStats]) -> (Vec<Component>, Vec<Vec<u32>>, Vec<PathClass>) {
    // Keyed by borrowed names, owned once per component: at 100,000 pairs
    // an owned key per crossing was a million string copies a cycle.
    let mut ids: HashMap<(Kind, &str), u32> = HashMap::new();
    let mut raw: Vec<Component> = Vec::new();
    let mut raw_rows: Vec<Vec<u32>> = Vec::new();
    let mut class = Vec::with_capacity(pairs.len());
    for (i, p) in pairs.iter().enumerate() {
        class.push(path_class(&p.src, &p.dst));
        let hops = p
            .hops
            .iter()
            .filter(|h| !h.is_empty())
            .map(|h| (Kind::Hop, h.as_str()));
        for c in path_ids(&p.src, &p.dst).into_iter().chain(hops) {
            let next = raw.len() as u32;
            let id = *ids.entry(c).or_insert_with(|| {
                raw.push(Component::new(c.0, c.1));
                raw_rows.push(Vec::new());
                next
            });
            let rows = &mut raw_rows[id as usize];
            // A hop listed twice for one pair is one crossing.
            if rows.last() != Some(&(i as u32)) {
                rows.push(i as u32);
            }
        }
    }
    (raw, raw_rows, class)
}

/// Groups of components with identical pair sets, representative first
/// ([`report_rank`]), in a deterministic column order.
fn merge_indistinguishable(raw: &[Component], raw_rows: &[Vec<u32>]) -> Vec<Vec<u32>> {
    // Merge components with identical pair sets (rows are pushed in
    // increasing pair order, so the lists are already sorted).
    let mut by_rows: HashMap<&[u32], Vec<u32>> = HashMap::new();
    for (id, rows) in raw_rows.iter().enumerate() {
        by_rows.entry(rows.as_slice()).or_default().push(id as u32);
    }
    let mut groups: Vec<Vec<u32>> = by_rows.into_values().collect();
    for g in &mut groups {
        g.sort_by(|&a, &b| {
            let (ca, cb) = (&raw[a as usize], &raw[b as usize]);
            report_rank(ca.kind)
                .cmp(&report_rank(cb.kind))
                .then_with(|| ca.id.cmp(&cb.id))
        });
    }
    // Deterministic column order (kind rank, then id).
    groups.sort_by(|a, b| {
        let (ca, cb) = (&raw[a[0] as usize], &raw[b[0] as usize]);
        report_rank(ca.kind)
            .cmp(&report_rank(cb.kind))
            .then_with(|| ca.id.cmp(&cb.id))
    });
    groups
}

impl PathMatrix {
    /// Build the matrix for `pairs` (row `i` is `pairs[i]`).
    pub fn build(pairs: &[&PairStats]) -> PathMatrix {
        let (raw, raw_rows, class) = intern(pairs);
        let groups = merge_indistinguishable(&raw, &raw_rows);
        let mut columns = Vec::with_capacity(groups.len());
        let mut equivalent = Vec::with_capacity(groups.len());
        let mut col_ptr = vec![0u32];
        let mut col_rows = Vec::new();
        let mut row_count = vec![0u32; pairs.len()];
        for g in &groups {
            columns.push(raw[g[0] as usize].clone());
            equivalent.push(g[1..].iter().map(|&c| raw[c as usize].clone()).collect());
            for &r in &raw_rows[g[0] as usize] {
                col_rows.push(r);
                row_count[r as usize] += 1;
            }
            col_ptr.push(col_rows.len() as u32);
        }
        let mut row_ptr = Vec::with_capacity(pairs.len() + 1);
        row_ptr.push(0u32);
        for c in &row_count {
            row_ptr.push(row_ptr.last().unwrap() + c);
        }
        let mut fill: Vec<u32> = row_ptr[..pairs.len()].to_vec();
        let mut row_cols = vec![0u32; col_rows.len()];
        for j in 0..columns.len() {
            for &r in &col_rows[col_ptr[j] as usize..col_ptr[j + 1] as usize] {
                row_cols[fill[r as usize] as usize] = j as u32;
                fill[r as usize] += 1;
            }
        }
        PathMatrix {
            columns,
            equivalent,
            row_ptr,
            row_cols,
            col_ptr,
            col_rows,
            class,
        }
    }

    /// Number of rows (pairs).
    pub fn pairs(&self) -> usize {
        self.class.len()
    }

    /// Pairs crossing column `j`.
    pub fn col(&self, j: usize) -> &[u32] {
        &self.col_rows[self.col_ptr[j] as usize..self.col_ptr[j + 1] as usize]
    }

    /// Columns crossed by pair `i`.
    pub fn row(&self, i: usize) -> &[u32] {
        &self.row_cols[self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize]
    }

    /// Column holding `c` (as representative or equivalent), if observed.
    pub fn find(&self, c: &Component) -> Option<usize> {
        (0..self.columns.len()).find(|&j| &self.columns[j] == c || self.equivalent[j].contains(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skeletonhunter_common::topology::Identity;

    fn ident(node: &str, nic: &str, host: &str, tor: &str, spine: &str) -> Identity {
        Identity {
            node: node.into(),
            nic: nic.into(),
            host: host.into(),
            tor: tor.into(),
            spine: spine.into(),
            ..Default::default()
        }
    }

    fn pair(a: Identity, b: Identity) -> PairStats {
        PairStats {
            src: a,
            dst: b,
            rounds: 1.0,
            ..Default::default()
        }
    }

    #[test]
    fn matrix_is_consistent_and_merges_indistinguishable_components() {
        let a = ident("a", "nic-a", "h1", "t1", "s1");
        let b = ident("b", "nic-b", "h1", "t1", "s1");
        let c = ident("c", "nic-c", "h2", "t2", "s1");
        let pairs = [pair(a.clone(), b.clone()), pair(b, c.clone()), pair(c, a)];
        let refs: Vec<&PairStats> = pairs.iter().collect();
        let m = PathMatrix::build(&refs);
        assert_eq!(m.pairs(), 3);
        // CSR and CSC describe the same matrix.
        for j in 0..m.columns.len() {
            for &i in m.col(j) {
                assert!(m.row(i as usize).contains(&(j as u32)));
            }
        }
        let nnz: usize = (0..3).map(|i| m.row(i).len()).sum();
        assert_eq!(nnz, m.col_rows.len());
        // node a and nic-a cross the same pairs: one column, the node
        // (smallest) reported.
        let j = m.find(&Component::new(Kind::Node, "a")).unwrap();
        assert_eq!(m.columns[j], Component::new(Kind::Node, "a"));
        assert_eq!(m.equivalent[j], vec![Component::new(Kind::Nic, "nic-a")]);
        // c, its nic, host h2, t2 and the spine see exactly pairs 1 and 2:
        // merged, and the container is the representative.
        let j = m.find(&Component::new(Kind::Tor, "t2")).unwrap();
        assert_eq!(m.columns[j], Component::new(Kind::Node, "c"));
        assert_eq!(m.col(j), &[1, 2]);
        assert_eq!(m.class[0], PathClass::SameHost);
        assert_eq!(m.class[1], PathClass::CrossTor);
    }

    #[test]
    fn traced_hops_join_the_row_and_rank_after_switches() {
        let a = ident("a", "nic-a", "h1", "t1", "s1");
        let b = ident("b", "nic-b", "h2", "t2", "s1");
        let c = ident("c", "nic-c", "h3", "t2", "s1");
        let mut ab = pair(a.clone(), b.clone());
        ab.hops = vec!["10.9.0.1".into(), "10.9.0.1".into(), "".into()];
        let mut ac = pair(a, c);
        ac.hops = vec!["10.9.0.2".into()];
        let pairs = [ab, ac, pair(b, ident("d", "nic-d", "h4", "t2", "s1"))];
        let refs: Vec<&PairStats> = pairs.iter().collect();
        let m = PathMatrix::build(&refs);
        let hop1 = Component::new(Kind::Hop, "10.9.0.1");
        let j = m.find(&hop1).unwrap();
        // Hop 10.9.0.1 is on pair 0 only (once, though listed twice), and
        // no label-derived component has that pair set.
        assert_eq!(m.col(j), &[0]);
        assert_eq!(m.columns[j], hop1);
        assert!(m.equivalent[j].is_empty());
        assert!(m.row(0).contains(&(j as u32)));
        // a's components, t1 and s1 cross pairs 0 and 1; no hop does.
        let j = m.find(&Component::new(Kind::Tor, "t1")).unwrap();
        assert_eq!(m.col(j), &[0, 1]);
        assert_eq!(m.columns[j], Component::new(Kind::Node, "a"));
        assert!(m.equivalent[j].iter().all(|c| c.kind != Kind::Hop));
        // No empty-address hop.
        assert!(m.find(&Component::new(Kind::Hop, "")).is_none());
    }
}
