//! Fuzz the exporter's outside-fed parsers on the stable toolchain:
//!
//! ```sh
//! cargo run --release -p skeletonhunter-exporter --example fuzz -- --target all --inputs 1000000
//! ```
//!
//! Prints inputs/s, accepted inputs, panics and broken invariants (both
//! must be 0) and, for the probe target, the largest reply/request ratio;
//! exits 1 on any failure, printing the first failing input in hex.

use skeletonhunter_exporter::fuzz::{run, Target};

fn usage() -> ! {
    eprintln!("usage: fuzz [--target probe|event|config|all] [--inputs N] [--seed N]");
    std::process::exit(2)
}

fn main() {
    let (mut targets, mut inputs, mut seed) = (Target::ALL.to_vec(), 1_000_000u64, 1u64);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--target" => targets = Target::parse(&value).unwrap_or_else(|| usage()),
            "--inputs" => inputs = value.parse().unwrap_or_else(|_| usage()),
            "--seed" => seed = value.parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let mut failed = false;
    for target in targets {
        let s = run(target, inputs, seed);
        println!(
            "{:<7} inputs {:>9}  accepted {:>9}  {:>9.0} inputs/s  panics {}  violations {}  max reply/request {:.3}",
            target.as_str(),
            s.inputs,
            s.accepted,
            s.rate(),
            s.panics,
            s.violations,
            s.max_ratio,
        );
        if let Some((input, why)) = &s.first_failure {
            failed = true;
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            println!("  first failure: {why}\n  input: {hex}");
        }
    }
    std::process::exit(i32::from(failed));
}
