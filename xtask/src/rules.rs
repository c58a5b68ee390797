//! The rules as `ARCHITECTURE.md` states them: a fenced `layers` block and
//! an exceptions table.
//!
//! ````text
//! ```layers
//! exporter: model < sys wire < config < app
//! ```
//!
//! ## Exceptions to the size limits
//! | what | lines | why |
//! |---|---|---|
//! | `exporter/src/sys/verbs.rs` | 700 | one FFI surface, split would scatter it |
//! | `exporter/src/app.rs::run` | 90 | … |
//! ````

use crate::violation::CheckError;
use std::collections::BTreeMap;

/// The layers of one crate, lowest first; each layer is a set of top-level
/// module names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers(pub Vec<Vec<String>>);

impl Layers {
    /// The layer index of a top-level module, if it is placed.
    pub fn of(&self, module: &str) -> Option<usize> {
        self.0.iter().position(|l| l.iter().any(|m| m == module))
    }
}

/// A size limit lifted for one file or function, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// `path` (a file) or `path::name` (every function of that name in it).
    pub target: String,
    /// Lines allowed instead of the default limit.
    pub lines: usize,
    /// The line of `ARCHITECTURE.md` that grants it.
    pub doc_line: usize,
}

impl Exception {
    /// The limit for a file, if this exception is for it.
    pub fn file_limit(&self, file: &str) -> Option<usize> {
        (self.target == file).then_some(self.lines)
    }

    /// The limit for function `name` in `file`, if this exception is for it.
    pub fn fn_limit(&self, file: &str, name: &str) -> Option<usize> {
        let (f, n) = self.target.rsplit_once("::")?;
        (f == file && n == name).then_some(self.lines)
    }
}

/// Everything the check reads from `ARCHITECTURE.md`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Crate directory → its layers.
    pub layers: BTreeMap<String, Layers>,
    /// Lifted size limits.
    pub exceptions: Vec<Exception>,
}

impl Rules {
    /// Parse the document; a malformed layers line or exception row is an
    /// error naming its line, never silently ignored.
    pub fn parse(doc: &str) -> Result<Self, CheckError> {
        let mut rules = Rules::default();
        let mut in_layers = false;
        let mut in_exceptions = false;
        for (i, line) in doc.lines().enumerate() {
            let n = i + 1;
            let t = line.trim();
            if t.starts_with("```") {
                in_layers = !in_layers && t == "```layers";
                continue;
            }
            if in_layers {
                if !t.is_empty() {
                    let (krate, layers) = parse_layers(t, n)?;
                    rules.layers.insert(krate, layers);
                }
                continue;
            }
            if t.starts_with('#') {
                in_exceptions = t.trim_start_matches('#').trim().starts_with("Exceptions");
                continue;
            }
            if in_exceptions && t.starts_with('|') {
                if let Some(e) = parse_exception(t, n)? {
                    rules.exceptions.push(e);
                }
            }
        }
        if rules.layers.is_empty() {
            return Err(CheckError::Rules {
                line: 0,
                message: "no ```layers block found".into(),
            });
        }
        Ok(rules)
    }
}

fn parse_layers(line: &str, n: usize) -> Result<(String, Layers), CheckError> {
    let err = |message: &str| CheckError::Rules {
        line: n,
        message: format!("{message}: {line:?} (expected `crate: a b < c < d`)"),
    };
    let (krate, rest) = line.split_once(':').ok_or_else(|| err("no crate name"))?;
    let layers: Vec<Vec<String>> = rest
        .split('<')
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    if layers.iter().any(Vec::is_empty) {
        return Err(err("empty layer"));
    }
    Ok((krate.trim().to_string(), Layers(layers)))
}

fn parse_exception(row: &str, n: usize) -> Result<Option<Exception>, CheckError> {
    let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
    if cells.len() < 3 || !cells[0].starts_with('`') {
        // Header and separator rows.
        return Ok(None);
    }
    let err = |message: &str| CheckError::Rules {
        line: n,
        message: message.to_string(),
    };
    let target = cells[0].trim_matches('`').to_string();
    let lines = cells[1]
        .parse()
        .map_err(|_| err("the second cell must be the number of lines allowed"))?;
    if cells[2].len() < 10 {
        return Err(err("an exception needs its reason in the third cell"));
    }
    Ok(Some(Exception {
        target,
        lines,
        doc_line: n,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# A\n```layers\nexporter: model < sys wire < app\n```\n\
        ## Exceptions to the size limits\n| what | lines | why |\n|---|---|---|\n\
        | `a/src/x.rs` | 700 | one FFI surface in one place |\n\
        | `a/src/y.rs::run` | 90 | the wiring reads top to bottom |\n## Other\n| `z` | 1 | not here at all |\n";

    #[test]
    fn reads_layers_and_exceptions() {
        let r = Rules::parse(DOC).unwrap();
        let l = &r.layers["exporter"];
        assert_eq!(l.of("model"), Some(0));
        assert_eq!(l.of("wire"), Some(1));
        assert_eq!(l.of("app"), Some(2));
        assert_eq!(l.of("http"), None);
        assert_eq!(r.exceptions.len(), 2);
        assert_eq!(r.exceptions[0].file_limit("a/src/x.rs"), Some(700));
        assert_eq!(r.exceptions[1].fn_limit("a/src/y.rs", "run"), Some(90));
        assert_eq!(r.exceptions[1].fn_limit("a/src/y.rs", "go"), None);
    }

    #[test]
    fn refuses_malformed_rules() {
        assert!(Rules::parse("no layers here").is_err());
        assert!(Rules::parse("```layers\nexporter model\n```").is_err());
        assert!(Rules::parse("```layers\nexporter: a < < b\n```").is_err());
        let bad_row =
            "```layers\ne: a\n```\n## Exceptions\n| `a.rs` | many | because it is long |\n";
        assert!(Rules::parse(bad_row).is_err());
        let no_why = "```layers\ne: a\n```\n## Exceptions\n| `a.rs` | 700 | |\n";
        assert!(Rules::parse(no_why).is_err());
    }
}
