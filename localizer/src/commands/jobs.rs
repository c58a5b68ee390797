//! `skeletonhunter-localizer jobs`: the communication groups (TP, DP, PP)
//! and grid of training jobs from their skeletons, JSON in and out.
//!
//! Input: `{"jobs": [{"job": NAME, "ranks": N, "edges": [[a, b, steadiness], ...]}]}`,
//! ranks numbered as the framework numbers them, steadiness the share of
//! discovery intervals the connection was seen in; with
//! `"ranks_per_container": K` the edges join containers of K ranks, as
//! online (`jobs::infer_blocks`). Output, per job: whether
//! the grid is trusted, the grid, its groups and the solve time (see
//! `jobs::infer`). A file that is not such a document, an edge naming a
//! rank outside its job, or a steadiness outside 0..=1 is bad input (exit
//! 2), named by job and edge.

use super::flags::{parse_size, BadInput};
use crate::jobs::{infer_blocks, BlockGraph, Inference, MAX_RANKS};
use serde::Deserialize;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

/// Flags of `jobs`.
#[derive(clap::Args, Debug, Clone)]
pub struct JobsArgs {
    /// The jobs' skeletons (JSON; `-` for standard input).
    #[arg(long)]
    pub input: PathBuf,
    /// Connections seen in a smaller share of the intervals are not part of
    /// a job's steady skeleton (stray or passing traffic) and are left out.
    #[arg(long, default_value_t = 0.25, value_parser = share)]
    pub min_steadiness: f64,
    /// Largest input read (units B, KiB, MiB, ...); a larger one is an error.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub max_input: usize,
    /// Pretty-print the JSON.
    #[arg(long)]
    pub pretty: bool,
}

/// A share between 0 and 1.
fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("a share from 0 to 1, got {s:?}")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    jobs: Vec<JobIn>,
}

#[derive(Deserialize)]
struct JobIn {
    job: String,
    ranks: u32,
    /// When set, the edges join containers of this many consecutive
    /// ranks (container `c` holds ranks `c·n ..`), as the skeleton is
    /// seen online; else they join ranks.
    #[serde(default)]
    ranks_per_container: Option<u32>,
    edges: Vec<Vec<f64>>,
}

/// One job's answer.
#[derive(serde::Serialize)]
struct JobOut {
    job: String,
    #[serde(flatten)]
    inference: Inference,
    seconds: f64,
}

/// Read, infer, print.
pub fn run(args: JobsArgs) -> anyhow::Result<()> {
    let doc = read(&args)?;
    let mut out = Vec::with_capacity(doc.jobs.len());
    for (i, j) in doc.jobs.into_iter().enumerate() {
        let graph = graph(i, &j, args.min_steadiness)?;
        let t0 = Instant::now();
        let inference = infer_blocks(&graph);
        out.push(JobOut {
            job: j.job,
            inference,
            seconds: t0.elapsed().as_secs_f64(),
        });
    }
    let json = serde_json::json!({ "jobs": out });
    let text = if args.pretty {
        serde_json::to_string_pretty(&json)?
    } else {
        serde_json::to_string(&json)?
    };
    println!("{text}");
    Ok(())
}

/// The document, at most `--max-input` bytes of it.
fn read(args: &JobsArgs) -> Result<Document, BadInput> {
    let name = args.input.display().to_string();
    let src: Box<dyn Read> = if name == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(&args.input)
                .map_err(|e| BadInput(format!("--input {name}: {e}")))?,
        )
    };
    let mut bytes = Vec::new();
    src.take(args.max_input as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| BadInput(format!("--input {name}: {e}")))?;
    if bytes.len() > args.max_input {
        return Err(BadInput(format!(
            "--input {name}: larger than --max-input ({} bytes)",
            args.max_input
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| BadInput(format!("--input {name}: {e}")))
}

/// Job `i`'s graph, its connections checked (between containers of one
/// rank where the job does not say otherwise: between ranks).
fn graph(i: usize, j: &JobIn, min_steadiness: f64) -> Result<BlockGraph, BadInput> {
    let at = |k: usize, what: String| BadInput(format!("job {i} ({:?}), edge {k}: {what}", j.job));
    if j.ranks > MAX_RANKS {
        return Err(BadInput(format!(
            "job {i} ({:?}): {} ranks, more than {MAX_RANKS}",
            j.job, j.ranks
        )));
    }
    let per = j.ranks_per_container.unwrap_or(1);
    if per == 0 {
        return Err(BadInput(format!(
            "job {i} ({:?}): ranks_per_container 0, want at least 1",
            j.job
        )));
    }
    let (ends, what) = match j.ranks_per_container {
        Some(_) => (j.ranks.div_ceil(per), "container"),
        None => (j.ranks, "rank"),
    };
    let mut edges = Vec::with_capacity(j.edges.len());
    for (k, e) in j.edges.iter().enumerate() {
        let (a, b, s) = match e[..] {
            [a, b] => (a, b, 1.0),
            [a, b, s] => (a, b, s),
            _ => {
                return Err(at(
                    k,
                    format!("{} numbers, want [a, b, steadiness]", e.len()),
                ))
            }
        };
        let rank = |v: f64| -> Result<u32, BadInput> {
            if v.fract() == 0.0 && v >= 0.0 && v < f64::from(ends) {
                Ok(v as u32)
            } else {
                Err(at(k, format!("{what} {v} is not one of 0..{ends}")))
            }
        };
        let (a, b) = (rank(a)?, rank(b)?);
        if !(0.0..=1.0).contains(&s) {
            return Err(at(k, format!("steadiness {s} is not from 0 to 1")));
        }
        if s >= min_steadiness {
            edges.push((a, b));
        }
    }
    Ok(BlockGraph {
        ranks: j.ranks,
        per,
        pairs: edges,
    })
}
