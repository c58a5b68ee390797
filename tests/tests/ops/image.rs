//! The OCI image `scripts/image.sh` builds without a container engine
//! (mmdebstrap, umoci): built from the binaries this test suite runs (their
//! debug info stripped, to keep it small), or reused when those and the
//! script are unchanged, then inspected with the tools a registry and a
//! runtime use (`skopeo inspect`, `umoci unpack`). No container runtime
//! can run here, so its run-time contract is checked statically — the
//! config's user, entry point, ports and labels against the Dockerfile, the
//! exporter's file capabilities on the unpacked root — and the binaries are
//! run inside that root with `chroot` as the image's user.

use anyhow::{Context, Result};
use serde_json::Value;
use skeletonhunter_tests::contract::{self, dockerfile_contract};
use skeletonhunter_tests::require_privileges;
use skeletonhunter_tools::deploy::{self, require_tool};
use skeletonhunter_tools::process::{bin_path, run_tool};
use skeletonhunter_tools::repo::repo_root;
use skeletonhunter_tools::servers::TempDir;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const TEST: &str = "image_is_built_and_keeps_the_runtime_contract";
const BINARIES: [&str; 2] = ["skeletonhunter-exporter", "skeletonhunter-localizer"];

/// `target/oci`, next to the profile directory of the binaries.
fn oci_dir() -> PathBuf {
    let exporter = bin_path(BINARIES[0]);
    let profile = exporter.parent().expect("profile dir");
    profile.parent().unwrap_or(profile).join("oci")
}

/// The workspace version, the image's default tag.
fn version() -> Result<String> {
    let cargo = deploy::read("Cargo.toml")?;
    let line = cargo
        .split("[workspace.package]")
        .nth(1)
        .and_then(|s| s.lines().find(|l| l.starts_with("version = ")))
        .context("Cargo.toml: no workspace version")?;
    Ok(line
        .trim_start_matches("version = ")
        .trim_matches('"')
        .to_string())
}

/// Build (or reuse) the image from the stripped binaries; returns the
/// layout and the binaries' directory.
fn build() -> Result<(PathBuf, PathBuf)> {
    let oci = oci_dir();
    let bins = oci.join("bin");
    std::fs::create_dir_all(&bins)?;
    for name in BINARIES {
        let out = bins.join(name).display().to_string();
        let src = bin_path(name).display().to_string();
        run_tool("strip", &["--strip-debug", "-o", &out, &src], None)?.ok()?;
    }
    let layout = oci.join("skeletonhunter");
    let script = repo_root().join("scripts/image.sh").display().to_string();
    let (b, l) = (bins.display().to_string(), layout.display().to_string());
    let out = run_tool(&script, &["--binaries", &b, "--out", &l], None)?.ok()?;
    println!("{}", out.stdout.lines().last().unwrap_or_default());
    Ok((layout, bins))
}

/// The libraries (`DT_NEEDED`) a binary names, by `readelf -d`.
fn needed(binary: &Path) -> Result<Vec<String>> {
    let out = run_tool("readelf", &["-d", &binary.display().to_string()], None)?.ok()?;
    Ok(out
        .stdout
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next().map(String::from))
        .collect())
}

/// The capabilities `getcap` reports on `file`, normalised, or none.
fn file_caps(file: &Path) -> Result<Vec<String>> {
    let out = run_tool("getcap", &[&file.display().to_string()], None)?.ok()?;
    let Some(list) = out.stdout.split_whitespace().nth(1) else {
        return Ok(Vec::new());
    };
    assert!(list.ends_with("=ep"), "{file:?}: {list} is not =ep");
    Ok(contract::caps(list.trim_end_matches("=ep").split(',')))
}

/// Check the image's config (`skopeo inspect`) against the Dockerfile.
fn check_config(reference: &str) -> Result<()> {
    let contract = dockerfile_contract()?;
    let inspect = |extra: &[&str]| -> Result<Value> {
        let mut args = vec!["inspect"];
        args.extend_from_slice(extra);
        args.push(reference);
        let out = run_tool("skopeo", &args, None)?.ok()?;
        serde_json::from_str(&out.stdout).context("skopeo inspect: not JSON")
    };
    let image = inspect(&[])?;
    let labels = &image["Labels"];
    for key in [
        "title",
        "description",
        "version",
        "revision",
        "created",
        "source",
        "licenses",
    ] {
        let k = format!("org.opencontainers.image.{key}");
        assert!(
            labels[&k].as_str().is_some_and(|v| !v.is_empty()),
            "no label {k}: {labels}"
        );
    }
    assert_eq!(labels["org.opencontainers.image.version"], version()?);
    let config = &inspect(&["--config"])?["config"];
    let user = format!("{}:{}", contract.uid, contract.gid);
    assert_eq!(config["User"], user, "the image's user is the Dockerfile's");
    assert_ne!(contract.uid, 0);
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/skeletonhunter-exporter"])
    );
    let ports: BTreeSet<String> = config["ExposedPorts"]
        .as_object()
        .context("ExposedPorts")?
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        ports,
        contract.expose.iter().cloned().collect(),
        "ExposedPorts = EXPOSE"
    );
    Ok(())
}

/// Check the unpacked root: the binaries as built, the exporter's file
/// capabilities, every library they link, no set-uid/set-gid file.
fn check_rootfs(rootfs: &Path, bins: &Path) -> Result<()> {
    let contract = dockerfile_contract()?;
    for name in BINARIES {
        let inside = rootfs.join("usr/local/bin").join(name);
        assert_eq!(
            std::fs::read(&inside).with_context(|| format!("{inside:?}"))?,
            std::fs::read(bins.join(name))?,
            "{name} in the image is the binary it was built from"
        );
        for lib in needed(&inside)? {
            let found = [
                "lib/x86_64-linux-gnu",
                "usr/lib/x86_64-linux-gnu",
                "lib64",
                "lib",
            ]
            .iter()
            .any(|d| rootfs.join(d).join(&lib).exists());
            assert!(found, "{name} links {lib}, which the image lacks");
        }
    }
    let exporter = rootfs.join("usr/local/bin/skeletonhunter-exporter");
    assert_eq!(
        file_caps(&exporter)?,
        contract.caps,
        "the exporter's file capabilities"
    );
    let localizer = rootfs.join("usr/local/bin/skeletonhunter-localizer");
    assert!(
        file_caps(&localizer)?.is_empty(),
        "the localizer has no capability"
    );
    assert!(needed(&exporter)?
        .iter()
        .any(|l| l.starts_with("libibverbs.so")));
    let providers = rootfs.join("usr/lib/x86_64-linux-gnu/libibverbs");
    assert!(
        std::fs::read_dir(&providers).is_ok_and(|mut d| d.next().is_some()),
        "no ibverbs providers"
    );
    let root = rootfs.display().to_string();
    let out = run_tool(
        "find",
        &[&root, "-xdev", "-perm", "/6000", "-type", "f"],
        None,
    )?
    .ok()?;
    assert!(
        out.stdout.trim().is_empty(),
        "set-uid/set-gid files:\n{}",
        out.stdout
    );
    Ok(())
}

/// The image builds (or is reused), carries the Dockerfile's run-time
/// contract, holds the binaries with what they link, and they start in its
/// root as its user.
#[test]
fn image_is_built_and_keeps_the_runtime_contract() -> Result<()> {
    if !require_privileges(TEST) {
        return Ok(());
    }
    let install = "apt-get install mmdebstrap umoci skopeo libcap2-bin (scripts/setup.sh does)";
    for tool in ["mmdebstrap", "umoci", "skopeo", "getcap", "readelf"] {
        if !require_tool(TEST, tool, install) {
            return Ok(());
        }
    }
    let (layout, bins) = build()?;
    let reference = format!("oci:{}:{}", layout.display(), version()?);
    check_config(&reference)?;

    let dir = TempDir::new("image")?;
    let bundle = dir.path().join("bundle");
    let image = format!("{}:{}", layout.display(), version()?);
    let b = bundle.display().to_string();
    run_tool("umoci", &["unpack", "--image", &image, &b], None)?.ok()?;
    let rootfs = bundle.join("rootfs");
    check_rootfs(&rootfs, &bins)?;

    // The runtime spec umoci derives from the config: the same user and
    // entry point.
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(bundle.join("config.json"))?)?;
    let contract = dockerfile_contract()?;
    assert_eq!(spec["process"]["user"]["uid"], contract.uid);
    assert_eq!(spec["process"]["user"]["gid"], contract.gid);
    assert_eq!(
        spec["process"]["args"][0],
        "/usr/local/bin/skeletonhunter-exporter"
    );

    // Both binaries start in the image's root as its user: the loader finds
    // every library there, and the exporter's file capabilities do not stop
    // its execve.
    let user = format!("{}:{}", contract.uid, contract.gid);
    let root = rootfs.display().to_string();
    for name in BINARIES {
        let path = format!("/usr/local/bin/{name}");
        let out = run_tool(
            "chroot",
            &["--userspec", &user, &root, &path, "--version"],
            None,
        )?
        .ok()?;
        assert!(
            out.stdout.contains(&version()?),
            "{name} --version: {}",
            out.stdout
        );
    }
    sidecar_starts(&root, &user)
}

/// The sidecar's `command` (deploy/kubernetes/sidecar) starts the exporter
/// in the image's root with no_new_privs and a bounding set without the
/// binary's file capabilities (only what `chroot --userspec` itself
/// needs), where executing the binary directly is refused.
fn sidecar_starts(root: &str, user: &str) -> Result<()> {
    let sidecar = deploy::sidecar()?;
    let command: Vec<&str> = sidecar.command.iter().map(String::as_str).collect();
    let run = |cmd: &[&str]| {
        let mut args = vec![
            "--no-new-privs",
            "--bounding-set=-all,+sys_chroot,+setuid,+setgid",
            "--",
            "chroot",
            "--userspec",
            user,
            root,
        ];
        args.extend(cmd);
        args.push("--version");
        run_tool("setpriv", &args, None)
    };
    let out = run(&command)?.ok()?;
    assert!(
        out.stdout.contains(&version()?),
        "{command:?}: {}",
        out.stdout
    );
    let direct = run(&command[1..])?;
    assert!(
        !direct.success && direct.stderr.contains("not permitted"),
        "the binary with file capabilities, outside its bounding set: {}{}",
        direct.stdout,
        direct.stderr
    );
    Ok(())
}
