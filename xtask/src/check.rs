//! The whole check: every rule over every crate of the workspace.

use crate::violation::{CheckError, Rule, Violation};
use crate::{modules, rules, sizes, unsafety, workspace};
use std::path::{Path, PathBuf};

/// Run every check over the workspace at `root`; the violations come back
/// sorted by file and line.
pub fn check(root: &Path) -> Result<Vec<Violation>, CheckError> {
    let doc_path = root.join("ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&doc_path).map_err(|source| CheckError::Io {
        path: doc_path,
        source,
    })?;
    let rules = rules::Rules::parse(&doc)?;
    let files = workspace::source_files(root)?;
    let mut out = Vec::new();
    let mut used = vec![false; rules.exceptions.len()];
    for file in &files {
        let parsed = match workspace::SourceFile::read(root, file) {
            Ok(p) => p,
            Err(v) => {
                out.push(v);
                continue;
            }
        };
        out.extend(unsafety::check(&parsed));
        out.extend(sizes::check(&parsed, &rules, &mut used));
    }
    for crate_dir in workspace::crate_dirs(root)? {
        out.extend(modules::check_crate(root, &crate_dir, &rules));
    }
    for (exception, used) in rules.exceptions.iter().zip(used) {
        if !used {
            out.push(Violation {
                file: PathBuf::from("ARCHITECTURE.md"),
                line: exception.doc_line,
                rule: Rule::StaleException,
                message: format!(
                    "exception for `{}` matches nothing over the limit: remove it",
                    exception.target
                ),
            });
        }
    }
    out.sort();
    Ok(out)
}
