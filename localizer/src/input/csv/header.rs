//! The header of a ping log: which column holds what. Names are trimmed
//! (and a UTF-8 byte-order mark dropped from the first); the required
//! columns must all be there, and no name twice: which of two `latency`
//! columns is meant cannot be told, so guessing would analyze the wrong one.

use skeletonhunter_common::topology::Kind;

/// Names accepted for a per-row probe count column.
pub const COUNT_COLUMNS: [&str; 6] = [
    "probe_count",
    "probes",
    "probe_num",
    "packet_count",
    "packets",
    "sent",
];

/// What is wrong with a header; the reader places it on line 1.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HeaderError {
    /// Required columns are not there.
    #[error("header lacks required column(s) {}", .0.join(", "))]
    Missing(Vec<&'static str>),
    /// A name appears twice (1-based column positions).
    #[error("appears twice in the header (columns {first} and {second})")]
    Duplicate {
        /// The name.
        name: String,
        /// Where it is first.
        first: usize,
        /// Where it is again.
        second: usize,
    },
}

impl HeaderError {
    /// The column to blame, when one is.
    pub fn column(&self) -> Option<&str> {
        match self {
            HeaderError::Missing(_) => None,
            HeaderError::Duplicate { name, .. } => Some(name),
        }
    }
}

/// The columns every ping log must have, in their usual order.
pub const REQUIRED_COLUMNS: [&str; 6] = [
    "src_node_id",
    "dst_node_id",
    "dial",
    "latency",
    "loss_rate",
    "ping_time",
];

/// Where each column the reader uses is.
pub struct Columns {
    pub src_node: usize,
    pub dst_node: usize,
    pub dial: usize,
    pub latency: usize,
    pub loss_rate: usize,
    pub ping_time: usize,
    /// A per-row probe count column, when the header has one.
    pub count: Option<usize>,
    /// `task_type` (which probe a row is), when the header has it.
    pub task: Option<usize>,
    /// `agent_type` (which plane a row measured), when the header has it.
    pub plane: Option<usize>,
    /// (kind, column index) per side for the identity columns present.
    pub src_topo: Vec<(Kind, usize, String)>,
    pub dst_topo: Vec<(Kind, usize, String)>,
}

/// The columns of `header`, or what is wrong with it (line 1).
pub fn columns(header: &csv::StringRecord) -> Result<Columns, HeaderError> {
    let names: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let h = if i == 0 {
                h.trim_start_matches('\u{feff}')
            } else {
                h
            };
            h.trim().to_string()
        })
        .collect();
    for (second, name) in names.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
        if let Some(first) = names[..second].iter().position(|n| n == name) {
            return Err(HeaderError::Duplicate {
                name: name.clone(),
                first: first + 1,
                second: second + 1,
            });
        }
    }
    let find = |name: &str| names.iter().position(|h| h == name);
    let missing: Vec<&'static str> = REQUIRED_COLUMNS
        .iter()
        .copied()
        .filter(|n| find(n).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(HeaderError::Missing(missing));
    }
    let topo = |side: &str| {
        Kind::ALL
            .into_iter()
            .filter(|k| *k != Kind::Node)
            .filter_map(|k| {
                let name = format!("{side}_{}", k.csv_suffix());
                find(&name).map(|i| (k, i, name))
            })
            .collect::<Vec<_>>()
    };
    Ok(Columns {
        src_node: find("src_node_id").unwrap_or_default(),
        dst_node: find("dst_node_id").unwrap_or_default(),
        dial: find("dial").unwrap_or_default(),
        latency: find("latency").unwrap_or_default(),
        loss_rate: find("loss_rate").unwrap_or_default(),
        ping_time: find("ping_time").unwrap_or_default(),
        count: COUNT_COLUMNS.iter().find_map(|n| find(n)),
        task: find("task_type"),
        plane: find("agent_type"),
        src_topo: topo("src"),
        dst_topo: topo("dst"),
    })
}
