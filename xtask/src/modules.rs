//! The module graph of one crate: cycles and layers.
//!
//! A module is a file (`foo.rs` or `foo/mod.rs`); inline modules belong to
//! their file. Module A depends on B when A's code names an item of B
//! (`use crate::b::X`, `super::X`, `b::X` for a child `b`, also inside macro
//! calls). Two things are not dependencies: `mod b;` declarations, and
//! `pub use` re-exports of a module's own descendants in a `lib.rs`,
//! `main.rs` or `mod.rs` (a facade). Code under `#[cfg(test)]` is left out:
//! tests may reach anywhere without shaping the shipped graph.

use crate::graph;
use crate::rules::Rules;
use crate::violation::{Rule, Violation};
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// One file module.
pub struct Module {
    /// Path from the crate root (`[]` for the root itself).
    pub path: Vec<String>,
    /// The file, relative to the repository root.
    pub file: PathBuf,
    /// Declared under `#[cfg(test)]`.
    pub is_test: bool,
    /// A `lib.rs`, `main.rs` or `mod.rs`: may re-export its descendants.
    pub facade: bool,
    ast: syn::File,
}

/// The file modules reachable from one crate root.
#[derive(Default)]
pub struct Tree {
    /// Every module, the root first.
    pub modules: Vec<Module>,
    index: HashMap<Vec<String>, usize>,
}

/// A dependency of one module on another, where it is first seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Index of the depending module.
    pub from: usize,
    /// Index of the module depended on.
    pub to: usize,
    /// First line in `from` that names `to`.
    pub line: usize,
}

/// Check every crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`) of
/// the crate in `crate_dir`; layers apply to the library.
pub fn check_crate(root: &Path, crate_dir: &Path, rules: &Rules) -> Vec<Violation> {
    let mut roots = vec![crate_dir.join("src/lib.rs"), crate_dir.join("src/main.rs")];
    if let Ok(bins) = std::fs::read_dir(root.join(crate_dir).join("src/bin")) {
        let mut bins: Vec<PathBuf> = bins
            .flatten()
            .map(|e| crate_dir.join("src/bin").join(e.file_name()))
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    let name = crate_dir.to_string_lossy().to_string();
    let mut out = Vec::new();
    for (i, root_file) in roots.iter().enumerate() {
        if !root.join(root_file).is_file() {
            continue;
        }
        let tree = Tree::build(root, root_file, &mut out);
        let edges = tree.edges();
        out.extend(tree.cycles(&edges));
        if i == 0 {
            if let Some(layers) = rules.layers.get(&name) {
                out.extend(tree.layer_violations(&edges, layers));
            }
        }
    }
    out
}

impl Tree {
    /// Follow `mod x;` declarations from `root_file`; files that cannot be
    /// read or parsed are reported and skipped.
    pub fn build(root: &Path, root_file: &Path, errors: &mut Vec<Violation>) -> Tree {
        let mut tree = Tree::default();
        let mut queue = vec![(Vec::new(), root_file.to_path_buf(), false, true)];
        while let Some((path, file, is_test, is_root)) = queue.pop() {
            let source = match crate::workspace::SourceFile::read(root, &file) {
                Ok(s) => s,
                Err(v) => {
                    errors.push(v);
                    continue;
                }
            };
            let stem = file.file_stem().map(|s| s.to_string_lossy().to_string());
            let facade = is_root || stem.as_deref() == Some("mod");
            let dir = if facade {
                file.parent().map(Path::to_path_buf).unwrap_or_default()
            } else {
                file.with_extension("")
            };
            for item in &source.ast.items {
                let syn::Item::Mod(m) = item else { continue };
                if m.content.is_some() {
                    continue;
                }
                let name = m.ident.to_string();
                let flat = dir.join(format!("{name}.rs"));
                let child = if root.join(&flat).is_file() {
                    flat
                } else {
                    dir.join(&name).join("mod.rs")
                };
                let mut child_path = path.clone();
                child_path.push(name);
                queue.push((child_path, child, is_test || is_cfg_test(&m.attrs), false));
            }
            tree.index.insert(path.clone(), tree.modules.len());
            tree.modules.push(Module {
                path,
                file,
                is_test,
                facade,
                ast: source.ast,
            });
        }
        tree
    }

    /// Every dependency between two different modules, first sighting only.
    pub fn edges(&self) -> Vec<Edge> {
        let mut seen: BTreeMap<(usize, usize), usize> = BTreeMap::new();
        for (from, module) in self.modules.iter().enumerate() {
            if module.is_test {
                continue;
            }
            let mut refs = Refs::new(self, module);
            refs.collect_aliases(&module.ast.items);
            refs.visit_file(&module.ast);
            for (to, line) in refs.found {
                if to != from {
                    let first = seen.entry((from, to)).or_insert(line);
                    *first = (*first).min(line);
                }
            }
        }
        seen.into_iter()
            .map(|((from, to), line)| Edge { from, to, line })
            .collect()
    }

    fn name(&self, i: usize) -> String {
        let p = &self.modules[i].path;
        if p.is_empty() {
            "crate".to_string()
        } else {
            p.join("::")
        }
    }

    fn cycles(&self, edges: &[Edge]) -> Vec<Violation> {
        let mut adjacency = vec![Vec::new(); self.modules.len()];
        for e in edges {
            adjacency[e.from].push(e.to);
        }
        graph::cycles(&adjacency)
            .into_iter()
            .map(|members| {
                let set: BTreeSet<usize> = members.iter().copied().collect();
                let ties: Vec<String> = edges
                    .iter()
                    .filter(|e| set.contains(&e.from) && set.contains(&e.to))
                    .map(|e| {
                        let f = &self.modules[e.from].file;
                        format!("{}:{} uses {}", f.display(), e.line, self.name(e.to))
                    })
                    .collect();
                let names: Vec<String> = members.iter().map(|&m| self.name(m)).collect();
                Violation {
                    file: self.modules[members[0]].file.clone(),
                    line: 0,
                    rule: Rule::Cycle,
                    message: format!("module cycle {{{}}}: {}", names.join(", "), ties.join("; ")),
                }
            })
            .collect()
    }

    fn layer_violations(&self, edges: &[Edge], layers: &crate::rules::Layers) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut unplaced = BTreeSet::new();
        for m in &self.modules {
            if let Some(top) = m.path.first() {
                if !m.is_test && layers.of(top).is_none() && unplaced.insert(top.clone()) {
                    out.push(Violation {
                        file: m.file.clone(),
                        line: 0,
                        rule: Rule::Unplaced,
                        message: format!(
                            "top-level module `{top}` is in no layer of ARCHITECTURE.md"
                        ),
                    });
                }
            }
        }
        for e in edges {
            let (Some(from), Some(to)) = (
                self.modules[e.from].path.first(),
                self.modules[e.to].path.first(),
            ) else {
                continue;
            };
            if let (Some(lf), Some(lt)) = (layers.of(from), layers.of(to)) {
                if lt > lf {
                    out.push(Violation {
                        file: self.modules[e.from].file.clone(),
                        line: e.line,
                        rule: Rule::Layer,
                        message: format!(
                            "`{}` (layer {lf}) uses `{}` (layer {lt}): dependencies point down",
                            self.name(e.from),
                            self.name(e.to)
                        ),
                    });
                }
            }
        }
        out
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Walks one file and records which modules its paths name.
struct Refs<'a> {
    tree: &'a Tree,
    scope: Vec<String>,
    file_module: Vec<String>,
    facade: bool,
    aliases: HashMap<String, Vec<String>>,
    found: Vec<(usize, usize)>,
}

impl<'a> Refs<'a> {
    fn new(tree: &'a Tree, module: &Module) -> Self {
        Refs {
            tree,
            scope: module.path.clone(),
            file_module: module.path.clone(),
            facade: module.facade,
            aliases: HashMap::new(),
            found: Vec::new(),
        }
    }

    /// `use crate::probe;` makes `probe::x` name a module later on.
    fn collect_aliases(&mut self, items: &[syn::Item]) {
        for item in items {
            if let syn::Item::Use(u) = item {
                for (segments, bound) in use_leaves(&u.tree) {
                    let Some(full) = self.absolute(&segments) else {
                        continue;
                    };
                    if let (Some(name), true) = (bound, self.tree.index.contains_key(&full)) {
                        self.aliases.insert(name, full);
                    }
                }
            }
        }
    }

    /// The absolute module-relative path a path names, if it is in-crate.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let (mut base, rest) = match first.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (self.scope.clone(), &segments[1..]),
            "super" => {
                let mut base = self.scope.clone();
                let supers = segments.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    base.pop()?;
                }
                (base, &segments[supers..])
            }
            name => {
                if let Some(alias) = self.aliases.get(name) {
                    (alias.clone(), &segments[1..])
                } else {
                    let mut child = self.scope.clone();
                    child.push(name.to_string());
                    if !self.tree.index.contains_key(&child) {
                        return None;
                    }
                    (self.scope.clone(), segments)
                }
            }
        };
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        Some(base)
    }

    /// The file module that holds the item `segments` names.
    fn resolve(&self, segments: &[String]) -> Option<usize> {
        let full = self.absolute(segments)?;
        (0..=full.len())
            .rev()
            .find_map(|n| self.tree.index.get(&full[..n]).copied())
    }

    fn record(&mut self, segments: &[String], line: usize) {
        if let Some(to) = self.resolve(segments) {
            self.found.push((to, line));
        }
    }

    fn is_descendant(&self, module: usize) -> bool {
        let p = &self.tree.modules[module].path;
        p.len() > self.file_module.len() && p.starts_with(&self.file_module)
    }
}

/// Each leaf of a use tree as (path, name it binds; `None` for a glob).
fn use_leaves(tree: &syn::UseTree) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(
        t: &syn::UseTree,
        prefix: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, Option<String>)>,
    ) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut full = prefix.clone();
                full.push(name.clone());
                let bound = if name == "self" {
                    prefix.last().cloned()
                } else {
                    Some(name)
                };
                out.push((full, bound));
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                out.push((full, Some(r.rename.to_string())));
            }
            syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// `crate::a::b`, `super::x`, `self::y` sequences inside macro tokens.
fn macro_paths(tokens: TokenStream, out: &mut Vec<(Vec<String>, usize)>) {
    let mut current: Vec<String> = Vec::new();
    let mut line = 0;
    let mut colons = 0;
    let flush = |current: &mut Vec<String>, line: usize, out: &mut Vec<(Vec<String>, usize)>| {
        if current.len() > 1 && matches!(current[0].as_str(), "crate" | "super" | "self") {
            out.push((std::mem::take(current), line));
        }
        current.clear();
    };
    for tt in tokens {
        match tt {
            TokenTree::Ident(i) if current.is_empty() || colons == 2 => {
                if current.is_empty() {
                    line = i.span().start().line;
                }
                current.push(i.to_string());
                colons = 0;
            }
            TokenTree::Punct(p) if p.as_char() == ':' && !current.is_empty() && colons < 2 => {
                colons += 1;
            }
            TokenTree::Group(g) => {
                flush(&mut current, line, out);
                colons = 0;
                macro_paths(g.stream(), out);
            }
            other => {
                flush(&mut current, line, out);
                colons = 0;
                if let TokenTree::Ident(i) = other {
                    line = i.span().start().line;
                    current.push(i.to_string());
                }
            }
        }
    }
    flush(&mut current, line, out);
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.scope.push(m.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.scope.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let exported = !matches!(u.vis, syn::Visibility::Inherited);
        let line = u.use_token.span.start().line;
        for (segments, _) in use_leaves(&u.tree) {
            let Some(to) = self.resolve(&segments) else {
                continue;
            };
            if !(self.facade && exported && self.is_descendant(to)) {
                self.found.push((to, line));
            }
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.record(&segments, line);
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let mut paths = Vec::new();
        macro_paths(m.tokens.clone(), &mut paths);
        for (segments, line) in paths {
            self.record(&segments, line);
        }
        syn::visit::visit_macro(self, m);
    }
}

#[cfg(test)]
mod tests;
