//! Components the probes cannot tell apart from a blamed one.
//!
//! Three sources: columns the path matrix merged because exactly the same
//! observed pairs cross them (see [`crate::engine::topology`]); columns
//! crossed by exactly the same pairs *with evidence of the symptom* (a
//! host whose one NIC refuses every dial shows its loss on the other NIC's
//! pairs alone, and loss cannot tell the two apart); and ECMP components
//! whose faults would hit exactly the same flows as the blamed one. All
//! are reported as the fault's `equivalent` list.

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

/// Other columns whose pairs with evidence of the symptom (`present`) are
/// exactly column `col`'s, none of them without. Only the columns of its
/// first such pair can be: a handful, whatever the fabric's size.
pub(super) fn same_evidence(m: &PathMatrix, present: &[bool], col: usize) -> Vec<usize> {
    let with_data = |j: usize| {
        m.col(j)
            .iter()
            .copied()
            .filter(|&i| present.get(i as usize).copied().unwrap_or(false))
    };
    let own: Vec<u32> = with_data(col).collect();
    let Some(&first) = own.first() else {
        return Vec::new();
    };
    m.row(first as usize)
        .iter()
        .map(|&j| j as usize)
        .filter(|&j| j != col && with_data(j).eq(own.iter().copied()))
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
