//! `skeletonhunter-exporter`: probes this host's skeleton peers and serves
//! the results on `/metrics`. This file only parses arguments, starts
//! logging and the runtime, and maps errors to exit codes (2: bad
//! configuration, 1: failure at run time); [`skeletonhunter_exporter::app`]
//! does the wiring.

#![forbid(unsafe_code)]

use clap::Parser;
use skeletonhunter_exporter::{app, config, sys};
use std::process::ExitCode;

fn main() -> ExitCode {
    sys::host::limit_malloc_retention();
    let args = config::Args::parse();
    skeletonhunter_common::logging::init(&args.log.directive(), args.log.log_format);
    for (old, new) in args.deprecated_flags() {
        tracing::warn!(
            "flag {old} is deprecated and will be removed in the next release; use {new}"
        );
    }
    let cfg = match config::Config::load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skeletonhunter-exporter: configuration error: {e:#}");
            return ExitCode::from(2);
        }
    };
    if args.check_config {
        print!("{}", cfg.summary(sys::host::nofile_after_raise().ok()));
        return ExitCode::SUCCESS;
    }
    // Two worker threads: RTTs come from kernel timestamps, so scheduling
    // delay does not distort them, but encoding a large /metrics must not
    // stall sending probes (a burst afterwards) or draining replies
    // (kernel drops = false loss).
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("skeletonhunter")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("skeletonhunter-exporter: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(app::run(args, cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("skeletonhunter-exporter: {e:#}");
            ExitCode::FAILURE
        }
    }
}
