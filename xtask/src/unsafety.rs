//! `unsafe` lives behind one door per crate: its `sys` module.
//!
//! Outside `src/sys.rs` / `src/sys/`, the keyword `unsafe` may not appear in
//! code (comments and strings do not count: the file is read as tokens), and
//! `allow(unsafe_code)` may only sit on the `mod sys` declaration itself.

use crate::violation::{Rule, Violation};
use crate::workspace::SourceFile;
use proc_macro2::{TokenStream, TokenTree};
use std::str::FromStr;

/// Check one file.
pub fn check(file: &SourceFile) -> Vec<Violation> {
    let mut out = Vec::new();
    let violation = |line: usize, message: &str| Violation {
        file: file.rel.clone(),
        line,
        rule: Rule::Unsafe,
        message: message.to_string(),
    };
    if !file.is_sys() {
        if let Ok(tokens) = TokenStream::from_str(&file.text) {
            for line in keyword_lines(tokens, "unsafe") {
                out.push(violation(
                    line,
                    "`unsafe` outside a `sys` module: move it behind the crate's sys door",
                ));
            }
        }
    }
    for attr in &file.ast.attrs {
        if allows_unsafe(attr) {
            out.push(violation(
                attr.pound_token.span.start().line,
                "crate-wide allow(unsafe_code): allow it only on `mod sys`",
            ));
        }
    }
    check_items(&file.ast.items, &mut |line| {
        out.push(violation(
            line,
            "allow(unsafe_code) on something other than `mod sys`",
        ));
    });
    out
}

fn check_items(items: &[syn::Item], report: &mut dyn FnMut(usize)) {
    for item in items {
        let (attrs, is_sys_mod) = match item {
            syn::Item::Mod(m) => (&m.attrs, m.ident == "sys" && m.content.is_none()),
            syn::Item::Fn(f) => (&f.attrs, false),
            syn::Item::Impl(i) => (&i.attrs, false),
            syn::Item::Struct(s) => (&s.attrs, false),
            syn::Item::Enum(e) => (&e.attrs, false),
            syn::Item::Trait(t) => (&t.attrs, false),
            syn::Item::Static(s) => (&s.attrs, false),
            syn::Item::Const(c) => (&c.attrs, false),
            syn::Item::ForeignMod(f) => (&f.attrs, false),
            _ => continue,
        };
        for attr in attrs {
            if allows_unsafe(attr) && !is_sys_mod {
                report(attr.pound_token.span.start().line);
            }
        }
        if let syn::Item::Mod(syn::ItemMod {
            content: Some((_, inner)),
            ..
        }) = item
        {
            check_items(inner, report);
        }
    }
}

/// `#[allow(unsafe_code)]`, `#[expect(unsafe_code)]` (inner or outer).
fn allows_unsafe(attr: &syn::Attribute) -> bool {
    let lifts = attr.path().is_ident("allow") || attr.path().is_ident("expect");
    lifts
        && match &attr.meta {
            syn::Meta::List(list) => keyword_lines(list.tokens.clone(), "unsafe_code")
                .next()
                .is_some(),
            _ => false,
        }
}

/// Lines where `word` stands as an identifier, at any depth of `tokens`.
fn keyword_lines(tokens: TokenStream, word: &str) -> impl Iterator<Item = usize> + '_ {
    let mut stack = vec![tokens.into_iter()];
    std::iter::from_fn(move || loop {
        let top = stack.last_mut()?;
        match top.next() {
            None => {
                stack.pop();
            }
            Some(TokenTree::Group(g)) => stack.push(g.stream().into_iter()),
            Some(TokenTree::Ident(i)) if i == word => return Some(i.span().start().line),
            Some(_) => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn at(path: &str, text: &str) -> Vec<Violation> {
        check(&SourceFile {
            rel: PathBuf::from(path),
            text: text.to_string(),
            ast: syn::parse_file(text).unwrap(),
        })
    }

    #[test]
    fn unsafe_only_behind_the_sys_door() {
        let code = "fn f() {\n    // unsafe in a comment is fine\n    let s = \"unsafe\";\n    unsafe { g() }\n}\n";
        let v = at("exporter/src/probe/udp.rs", code);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].line, 4);
        assert!(at("exporter/src/sys/sock.rs", code).is_empty());
        assert!(at("tools/src/sys.rs", code).is_empty());
        let in_macro = "fn f() { m!(unsafe { g() }); }\n";
        assert_eq!(at("a/src/x.rs", in_macro).len(), 1);
    }

    #[test]
    fn allow_only_on_mod_sys() {
        assert!(at("a/src/lib.rs", "#[allow(unsafe_code)]\npub mod sys;\n").is_empty());
        assert_eq!(at("a/src/lib.rs", "#![allow(unsafe_code)]\n").len(), 1);
        assert_eq!(
            at("a/src/lib.rs", "#[allow(unsafe_code)]\nmod other;\n").len(),
            1
        );
        assert_eq!(
            at(
                "a/src/lib.rs",
                "mod m {\n    #[allow(dead_code, unsafe_code)]\n    fn f() {}\n}\n"
            )
            .len(),
            1
        );
    }
}
