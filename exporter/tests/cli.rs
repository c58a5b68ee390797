//! The binary's exit codes for configurations that must not run: 2, with
//! the key on stderr.

use std::process::Command;

fn run(yaml: &str, flags: &[&str]) -> (Option<i32>, String) {
    // Removed on drop, with the file in it.
    let dir = skeletonhunter_tools::servers::TempDir::new("exporter-cli").unwrap();
    let path = dir.path().join(format!("{:x}.yaml", fxhash(yaml)));
    std::fs::write(&path, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skeletonhunter-exporter"))
        .arg("--config")
        .arg(&path)
        .args(flags)
        .arg("--check-config")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn refused_configs_exit_2_and_name_the_key() {
    let cases: [(&str, &[&str], &str); 6] = [
        (
            "discovery: {ebpf: false, dns: [{name: x, refresh: 0s}]}",
            &[],
            "discovery.dns[0].refresh",
        ),
        (
            "discovery: {ebpf: false, static: [{address: 255.255.255.255}]}",
            &[],
            "discovery.static[0].address",
        ),
        ("probe: {udp_port: 0}", &[], "probe.udp_port"),
        ("probe: {protocols: []}", &[], "probe.protocols"),
        (
            "discovery: {ebpf: false}",
            &["--peers", "10.0.0.2,10.0.0.2"],
            "--peers entry 2",
        ),
        (
            "discovery: {ebpf: false}",
            &["--http-max-connections", "0"],
            "--http-max-connections",
        ),
    ];
    for (yaml, flags, key) in cases {
        let (code, stderr) = run(yaml, flags);
        assert_eq!(code, Some(2), "{yaml} {flags:?}: {stderr}");
        assert!(stderr.contains(key), "{yaml} {flags:?}: {stderr}");
    }
    let (code, stderr) = run(
        "discovery: {ebpf: false, static: [{address: 10.0.0.2}]}",
        &[],
    );
    assert_eq!(code, Some(0), "a good config: {stderr}");
}
