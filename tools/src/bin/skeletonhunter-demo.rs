//! `skeletonhunter-demo`: the whole system on a fabric of network
//! namespaces — a fault, its localization and the alert (see
//! `skeletonhunter_tools::demo`).
//!
//! Needs root (namespaces, nftables). Nothing leaves the machine: the fabric
//! has no link to the host's network namespace. A bad flag exits 2, a
//! failed run 1.

use clap::Parser;
use skeletonhunter_tools::demo::{self, Args};
use skeletonhunter_tools::fabric::remove_namespaces_of;

fn main() {
    let args = Args::parse();
    demo::cleanup_on_signal();
    let code = match demo::run(&args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("skeletonhunter-demo: error: {e:#}");
            1
        }
    };
    // The stack was dropped inside `run`, so namespaces are gone; this
    // catches anything a failed start left behind.
    remove_namespaces_of(std::process::id());
    std::process::exit(code);
}
