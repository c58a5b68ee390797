//! File and function lengths.

use crate::rules::Rules;
use crate::violation::{Rule, Violation, MAX_FILE_LINES, MAX_FN_LINES};
use crate::workspace::SourceFile;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// Check one file against the size limits; `used` marks the exceptions
/// (by index into `rules.exceptions`) that lifted a limit that was needed.
pub fn check(file: &SourceFile, rules: &Rules, used: &mut [bool]) -> Vec<Violation> {
    let mut out = Vec::new();
    let name = file.rel.to_string_lossy().replace('\\', "/");
    let lines = file.text.lines().count();
    if lines > MAX_FILE_LINES {
        let limit = lookup(rules, used, |e| e.file_limit(&name)).unwrap_or(MAX_FILE_LINES);
        if lines > limit {
            out.push(Violation {
                file: file.rel.clone(),
                line: 0,
                rule: Rule::FileSize,
                message: format!("{lines} lines, over the limit of {limit}"),
            });
        }
    }
    let mut fns = FnLengths::default();
    fns.visit_file(&file.ast);
    for (fn_name, line, len) in fns.found {
        if len <= MAX_FN_LINES {
            continue;
        }
        let limit = lookup(rules, used, |e| e.fn_limit(&name, &fn_name)).unwrap_or(MAX_FN_LINES);
        if len > limit {
            out.push(Violation {
                file: file.rel.clone(),
                line,
                rule: Rule::FnSize,
                message: format!("fn `{fn_name}` is {len} lines, over the limit of {limit}"),
            });
        }
    }
    out
}

fn lookup(
    rules: &Rules,
    used: &mut [bool],
    f: impl Fn(&crate::rules::Exception) -> Option<usize>,
) -> Option<usize> {
    let (i, limit) = rules
        .exceptions
        .iter()
        .enumerate()
        .find_map(|(i, e)| f(e).map(|l| (i, l)))?;
    used[i] = true;
    Some(limit)
}

/// Collects (name, first line, length) of every function with a body,
/// `#[test]` functions excepted.
#[derive(Default)]
struct FnLengths {
    found: Vec<(String, usize, usize)>,
}

impl FnLengths {
    fn record(&mut self, attrs: &[syn::Attribute], name: &syn::Ident, span: proc_macro2::Span) {
        if attrs.iter().any(is_test_attr) {
            return;
        }
        let (start, end) = (span.start().line, span.end().line);
        self.found
            .push((name.to_string(), start, end.saturating_sub(start) + 1));
    }
}

/// `#[test]`, `#[tokio::test]` and the like.
fn is_test_attr(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "test")
}

/// The span from the signature to the closing brace (attributes and doc
/// comments do not count towards a function's length).
fn body_span(sig: &syn::Signature, block: &syn::Block) -> proc_macro2::Span {
    sig.fn_token
        .span
        .join(block.brace_token.span.close())
        .unwrap_or_else(|| block.span())
}

impl<'ast> Visit<'ast> for FnLengths {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(&f.attrs, &f.sig.ident, body_span(&f.sig, &f.block));
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.record(&f.attrs, &f.sig.ident, body_span(&f.sig, &f.block));
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.record(&f.attrs, &f.sig.ident, body_span(&f.sig, block));
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(text: &str) -> SourceFile {
        SourceFile {
            rel: PathBuf::from("a/src/x.rs"),
            text: text.to_string(),
            ast: syn::parse_file(text).unwrap(),
        }
    }

    fn long_fn(name: &str, body_lines: usize, attr: &str) -> String {
        let body = "    let _ = 1;\n".repeat(body_lines);
        format!("{attr}\nfn {name}() {{\n{body}}}\n")
    }

    #[test]
    fn flags_long_functions_but_not_tests() {
        let text =
            long_fn("short", 78, "") + &long_fn("long", 79, "") + &long_fn("t", 200, "#[test]");
        let v = check(&file(&text), &Rules::default(), &mut []);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].rule, Rule::FnSize);
        assert!(
            v[0].message.contains("`long` is 81 lines"),
            "{}",
            v[0].message
        );
    }

    #[test]
    fn flags_long_files_unless_excepted() {
        let text = "const A: u8 = 0;\n".repeat(MAX_FILE_LINES + 1);
        let v = check(&file(&text), &Rules::default(), &mut []);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].rule, Rule::FileSize);
        let rules = Rules {
            exceptions: vec![crate::rules::Exception {
                target: "a/src/x.rs".into(),
                lines: 700,
                doc_line: 1,
            }],
            ..Rules::default()
        };
        let mut used = [false];
        assert!(check(&file(&text), &rules, &mut used).is_empty());
        assert!(used[0]);
    }
}
