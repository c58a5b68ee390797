//! Compiles the eBPF programs in `bpf/*.c` with clang (`-target bpf`) into
//! `$OUT_DIR/<name>.o`; the exporter embeds them with aya's
//! `include_bytes_aligned!`. There is no nightly toolchain here, so the BPF
//! side is C rather than aya-ebpf.
//!
//! `CLANG` selects the compiler (default: `clang`, then `clang-14`..`clang-19`).
//! A missing compiler fails the build with a message saying what to install.

use std::path::{Path, PathBuf};
use std::process::Command;

fn find_clang() -> Option<String> {
    if let Ok(c) = std::env::var("CLANG") {
        return Some(c);
    }
    let mut names = vec!["clang".to_string()];
    names.extend((14..=19).rev().map(|v| format!("clang-{v}")));
    names.into_iter().find(|n| {
        Command::new(n)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// Debian keeps `asm/types.h` under the multiarch include directory, which
/// clang does not search for `-target bpf`.
fn multiarch_include(arch: &str) -> Option<PathBuf> {
    let triple = match arch {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        "powerpc64" => "powerpc64le-linux-gnu",
        "s390x" => "s390x-linux-gnu",
        _ => return None,
    };
    let p = Path::new("/usr/include").join(triple);
    p.exists().then_some(p)
}

/// The `__TARGET_ARCH_*` define `bpf_tracing.h` needs for `PT_REGS_PARM*`.
fn target_arch_define(arch: &str) -> &'static str {
    match arch {
        "aarch64" => "arm64",
        "riscv64" => "riscv",
        "powerpc64" => "powerpc",
        "s390x" => "s390",
        _ => "x86",
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("..").join("bpf");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    println!("cargo:rerun-if-env-changed=CLANG");

    let mut sources: Vec<PathBuf> = std::fs::read_dir(&bpf_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", bpf_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();

    let Some(clang) = find_clang() else {
        panic!(
            "\n\nskeletonhunter-exporter: clang not found; it compiles the eBPF programs in bpf/.\n\
             Install it (Debian: `apt-get install clang libbpf-dev linux-libc-dev`, or run \
             scripts/setup.sh), or point CLANG at a clang binary.\n"
        );
    };

    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let stem = src
            .file_stem()
            .expect("file stem")
            .to_string_lossy()
            .into_owned();
        let obj = out_dir.join(format!("{stem}.o"));
        let mut cmd = Command::new(&clang);
        cmd.args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
            .arg(format!("-D__TARGET_ARCH_{}", target_arch_define(&arch)));
        if let Some(inc) = multiarch_include(&arch) {
            cmd.arg("-I").arg(inc);
        }
        cmd.arg("-c").arg(&src).arg("-o").arg(&obj);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {clang}: {e}"));
        if !out.status.success() {
            panic!(
                "\n\n{clang} failed to compile {} (are libbpf-dev and linux-libc-dev installed?):\n{}\n",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
