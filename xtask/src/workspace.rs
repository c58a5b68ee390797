//! Finding the workspace's crates and source files, and reading one file.

use crate::violation::{CheckError, Rule, Violation};
use std::path::{Path, PathBuf};

/// The member directories of the workspace at `root`, from its manifest's
/// `members = [...]` list (plain names only, which is all this workspace
/// uses).
pub fn crate_dirs(root: &Path) -> Result<Vec<PathBuf>, CheckError> {
    let manifest = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|source| CheckError::Io {
        path: manifest.clone(),
        source,
    })?;
    let start = text
        .find("members")
        .and_then(|i| text[i..].find('[').map(|j| i + j + 1))
        .ok_or_else(|| CheckError::Members(manifest.clone()))?;
    let end = text[start..]
        .find(']')
        .map(|j| start + j)
        .ok_or_else(|| CheckError::Members(manifest.clone()))?;
    let dirs: Vec<PathBuf> = text[start..end]
        .split(',')
        .map(|s| s.trim().trim_matches('"'))
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        return Err(CheckError::Members(manifest));
    }
    Ok(dirs)
}

/// Every `.rs` file of every member, relative to `root`, sorted; build
/// output (`target*`) is skipped.
pub fn source_files(root: &Path) -> Result<Vec<PathBuf>, CheckError> {
    let mut out = Vec::new();
    for dir in crate_dirs(root)? {
        walk(root, &dir, &mut out);
    }
    out.sort();
    Ok(out)
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = rel.join(&*name);
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && !name.starts_with("target") && !name.starts_with('.') {
            walk(root, &path, out);
        } else if kind.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// One source file, read and parsed.
pub struct SourceFile {
    /// Path relative to the repository root.
    pub rel: PathBuf,
    /// The text.
    pub text: String,
    /// The syntax tree.
    pub ast: syn::File,
}

impl SourceFile {
    /// Read and parse `rel` below `root`; an unreadable or unparsable file is
    /// itself a violation, so one bad file does not stop the whole check.
    pub fn read(root: &Path, rel: &Path) -> Result<Self, Violation> {
        let unreadable = |line: usize, message: String| Violation {
            file: rel.to_path_buf(),
            line,
            rule: Rule::Unreadable,
            message,
        };
        let text = std::fs::read_to_string(root.join(rel))
            .map_err(|e| unreadable(0, format!("cannot read: {e}")))?;
        let ast = syn::parse_file(&text)
            .map_err(|e| unreadable(e.span().start().line, format!("cannot parse: {e}")))?;
        Ok(Self {
            rel: rel.to_path_buf(),
            text,
            ast,
        })
    }

    /// Whether this file lies behind a `sys` door: `src/sys.rs` or anything
    /// under `src/sys/`.
    pub fn is_sys(&self) -> bool {
        is_sys_path(&self.rel)
    }
}

/// See [`SourceFile::is_sys`].
pub fn is_sys_path(rel: &Path) -> bool {
    let parts: Vec<_> = rel.iter().map(|p| p.to_string_lossy()).collect();
    parts
        .windows(2)
        .any(|w| w[0] == "src" && (w[1] == "sys" || w[1] == "sys.rs"))
}
