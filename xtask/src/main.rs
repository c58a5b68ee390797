//! `cargo xtask check [ROOT]`: run the architecture checks of
//! `ARCHITECTURE.md` and list every violation. Exit 0 when there is none,
//! 1 when there are, 2 when the check cannot run (bad usage, no
//! `ARCHITECTURE.md`, malformed rules).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask check [REPO_ROOT]\n\n\
Checks module cycles and layers, `unsafe` outside `sys/`, and file and\n\
function sizes, against the rules written in ARCHITECTURE.md.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = match args.as_slice() {
        [cmd] if cmd == "check" => default_root(),
        [cmd, root] if cmd == "check" => PathBuf::from(root),
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match xtask::check(&root) {
        Ok(violations) if violations.is_empty() => {
            println!("xtask check: no violations");
            ExitCode::SUCCESS
        }
        Ok(violations) => {
            for v in &violations {
                println!("{v}");
            }
            println!("xtask check: {} violation(s)", violations.len());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask check: {e}");
            ExitCode::from(2)
        }
    }
}

/// The workspace root: the parent of this crate's manifest directory.
fn default_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}
