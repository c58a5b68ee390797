//! Candidate screening: a non-positive, weighted Lasso solved by cyclic
//! coordinate descent over the sparse path matrix.
//!
//! The Lasso only proposes candidates (columns with `β < 0`); the
//! likelihood-ratio and coverage tests in [`super::hypothesis`] decide.
//! Each column's penalty is a multiple of the null standard deviation of
//! its score, an absolute rather than a relative penalty, so a large fault
//! does not hide a small one.

use crate::engine::topology::PathMatrix;

/// How many null standard deviations a column's score must exceed to enter
/// the Lasso. Lenient: the Lasso only proposes; the tests decide.
const SCREEN_Z: f64 = 3.0;

/// Solve `min ½ Σ w_i (y_i - (Aβ)_i)² + Σ_j λ_j |β_j|` subject to `β ≤ 0`
/// by cyclic coordinate descent with an active set. Pairs with `w_i = 0` do
/// not count. Returns β per column.
pub fn nonpositive_lasso(
    m: &PathMatrix,
    y: &[f64],
    w: &[f64],
    penalty: &[f64],
    max_sweeps: usize,
) -> Vec<f64> {
    let ncol = m.columns.len();
    let mut beta = vec![0.0; ncol];
    let mut resid: Vec<f64> = y.to_vec();
    let zsum: Vec<f64> = (0..ncol)
        .map(|j| m.col(j).iter().map(|&i| w[i as usize]).sum())
        .collect();
    let scale = y
        .iter()
        .zip(w)
        .map(|(y, w)| (y * w).abs())
        .fold(0.0, f64::max)
        .max(1e-300);
    let tol = 1e-9 * scale;
    let update = |j: usize, beta: &mut [f64], resid: &mut [f64]| -> f64 {
        if zsum[j] <= 0.0 {
            return 0.0;
        }
        let rows = m.col(j);
        let mut rho = 0.0;
        for &i in rows {
            rho += w[i as usize] * resid[i as usize];
        }
        rho += zsum[j] * beta[j];
        let new = ((rho + penalty[j]) / zsum[j]).min(0.0);
        let delta = new - beta[j];
        if delta != 0.0 {
            for &i in rows {
                resid[i as usize] -= delta;
            }
            beta[j] = new;
        }
        (delta * zsum[j]).abs()
    };
    let mut sweeps = 0;
    while sweeps < max_sweeps {
        // Full sweep, then iterate on the active set until it settles.
        let mut change = 0.0f64;
        for j in 0..ncol {
            change = change.max(update(j, &mut beta, &mut resid));
        }
        sweeps += 1;
        if change <= tol {
            break;
        }
        let active: Vec<usize> = (0..ncol).filter(|&j| beta[j] < 0.0).collect();
        while sweeps < max_sweeps {
            let mut c = 0.0f64;
            for &j in &active {
                c = c.max(update(j, &mut beta, &mut resid));
            }
            sweeps += 1;
            if c <= tol {
                break;
            }
        }
    }
    beta
}

/// Null-noise penalty per column: `z · sqrt(Σ_{i∈j} w_i² v_i)`.
pub(super) fn penalties(m: &PathMatrix, w: &[f64], var: &[f64]) -> Vec<f64> {
    (0..m.columns.len())
        .map(|j| {
            let s: f64 = m
                .col(j)
                .iter()
                .map(|&i| w[i as usize] * w[i as usize] * var[i as usize])
                .sum();
            SCREEN_Z * s.sqrt() + 1e-300
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::PairStats;
    use skeletonhunter_common::topology::{Component, Identity, Kind};

    fn node(n: &str, host: &str, tor: &str) -> Identity {
        Identity {
            node: n.into(),
            host: host.into(),
            tor: tor.into(),
            ..Default::default()
        }
    }

    /// A 6-pair, 5-column toy matrix with known structure.
    fn toy() -> PathMatrix {
        let a = node("a", "h1", "t1");
        let b = node("b", "h2", "t1");
        let c = node("c", "h3", "t1");
        let d = node("d", "h4", "t1");
        let pairs: Vec<PairStats> = [(&a, &b), (&b, &c), (&c, &d), (&d, &a), (&a, &c), (&b, &d)]
            .iter()
            .map(|(x, y)| PairStats {
                src: (*x).clone(),
                dst: (*y).clone(),
                rounds: 1.0,
                ..Default::default()
            })
            .collect();
        let refs: Vec<&PairStats> = pairs.iter().collect();
        PathMatrix::build(&refs)
    }

    /// Evidence `v` on every pair that crosses column `j`, 0 elsewhere.
    fn on_column(m: &PathMatrix, j: usize, v: f64) -> Vec<f64> {
        (0..m.pairs())
            .map(|i| {
                if m.row(i).contains(&(j as u32)) {
                    v
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The lasso of `y` with unit weights and `penalty` on every column.
    fn lasso(m: &PathMatrix, y: &[f64], penalty: f64) -> Vec<f64> {
        let w = vec![1.0; m.pairs()];
        nonpositive_lasso(m, y, &w, &vec![penalty; m.columns.len()], 1000)
    }

    #[test]
    fn lasso_recovers_a_sparse_nonpositive_solution() {
        let m = toy();
        let j = m.find(&Component::new(Kind::Host, "h1")).unwrap();
        // y = A β with β_h1 = -0.3 and nothing else.
        let beta = lasso(&m, &on_column(&m, j, -0.3), 1e-6);
        for (k, b) in beta.iter().enumerate() {
            if k == j {
                assert!((b + 0.3).abs() < 1e-3, "beta_h1 = {b}");
            } else {
                assert!(b.abs() < 1e-3, "{} = {b}", m.columns[k]);
            }
        }
        // Positive evidence (a pair better than baseline) never gives a
        // positive beta.
        let beta = lasso(&m, &vec![0.2; m.pairs()], 0.0);
        assert!(beta.iter().all(|&b| b == 0.0));
    }

    #[test]
    fn lasso_penalty_shrinks_and_zeroes_small_effects() {
        let m = toy();
        let j = m.find(&Component::new(Kind::Host, "h1")).unwrap();
        // h1 crosses 3 pairs: its score is 0.03; a penalty of 0.05 zeroes it.
        let beta = lasso(&m, &on_column(&m, j, -0.01), 0.05);
        assert!(beta.iter().all(|&b| b == 0.0));
    }
}
