//! Components the probes cannot tell apart from a blamed one.
//!
//! Two sources: columns the path matrix merged because exactly the same
//! observed pairs cross them (see [`crate::engine::topology`]), and ECMP
//! components whose faults would hit exactly the same flows as the blamed
//! one. Both are reported as the fault's `equivalent` list.

use super::hypothesis::Verdict;
use crate::engine::topology::PathMatrix;
use skeletonhunter_common::topology::Component;
use std::collections::HashMap;

/// Other passing ECMP candidates hitting exactly the pairs `best` hits.
pub(super) fn ecmp_siblings(
    best: &Verdict,
    remaining: &[usize],
    last: &HashMap<usize, Verdict>,
) -> Vec<usize> {
    remaining
        .iter()
        .copied()
        .filter(|&j| {
            last.get(&j)
                .is_some_and(|v| j != best.col && v.ecmp && v.passes && v.hit == best.hit)
        })
        .collect()
}

/// The components reported as equivalent to the fault of verdict `v`: its
/// own column's merged components, then each ECMP sibling with its own.
pub(super) fn equivalent_components(m: &PathMatrix, v: &Verdict) -> Vec<Component> {
    m.equivalent[v.col]
        .iter()
        .cloned()
        .chain(v.also.iter().flat_map(|&j| {
            std::iter::once(m.columns[j].clone()).chain(m.equivalent[j].iter().cloned())
        }))
        .collect()
}
