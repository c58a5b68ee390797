//! Seeds and structure-aware mutations of the configuration file: whole
//! lines deleted, duplicated, swapped, re-indented or spliced from another
//! entry; values replaced by tokens that sit on the validators' edges.

use super::mutate::{mutate_bytes, Rng};

/// The shipped example and small files that reach each section.
pub fn config_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![include_str!("../../config.example.yaml")
        .as_bytes()
        .to_vec()];
    for s in [
        "",
        "listen: 127.0.0.1:9465\nprobe:\n  interval: 200ms\n  protocols: [udp]\n",
        "discovery:\n  static:\n    - address: 10.0.0.2\n      udp_port: 9466\n",
        "identity:\n  tor: asw-1\ndiscovery:\n  tor_mesh:\n    refresh: 5s\n    peers:\n      - {address: 10.0.0.3, tor: asw-1}\n",
        "discovery:\n  dns:\n    - name: a.example\n      record: srv\n      refresh: 2s\n",
        "discovery:\n  ebpf: false\n",
        "responder:\n  udp: off\n  tcp: \"[::]:9467\"\n",
    ] {
        seeds.push(s.as_bytes().to_vec());
    }
    seeds
}

/// Values on the edges of what the validators accept.
const TOKENS: [&str; 32] = [
    "0s",
    "0",
    "-1",
    "1e308",
    "999999999999999h",
    "500us",
    "1x",
    "off",
    "\"\"",
    "~",
    "null",
    "[]",
    "{}",
    "[udp, udp]",
    "[rdma, icmp, tcp, udp]",
    "0.0.0.0",
    "255.255.255.255",
    "224.0.0.1",
    "::",
    "::1",
    "10.0.0.2:0",
    "10.0.0.2:65536",
    "[fe80::1%eth0]:9466",
    "65535",
    "18446744073709551616",
    "true",
    "&a x",
    "*a",
    "!!binary AAAA",
    "\"\\u0000\"",
    "|\n  multi",
    "é🦀",
];

/// One YAML-aware mutation of `buf`, sometimes followed by byte noise.
pub fn mutate_config(rng: &mut Rng, buf: &mut Vec<u8>, other: &[u8]) {
    let text = String::from_utf8_lossy(buf).into_owned();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let others: Vec<&str> = std::str::from_utf8(other)
        .map(|s| s.lines().collect())
        .unwrap_or_default();
    let n = lines.len();
    match rng.below(6) {
        0 if n > 0 => {
            lines.remove(rng.below(n));
        }
        1 if n > 0 => {
            let l = lines[rng.below(n)].clone();
            lines.insert(rng.below(n + 1), l);
        }
        2 if n > 1 => lines.swap(rng.below(n), rng.below(n)),
        3 if n > 0 => {
            let i = rng.below(n);
            let indent = " ".repeat(rng.below(8));
            lines[i] = format!("{indent}{}", lines[i].trim_start());
        }
        4 if !others.is_empty() => {
            let l = rng.pick(&others).to_string();
            lines.insert(rng.below(n + 1), l);
        }
        _ if n > 0 => {
            let i = rng.below(n);
            let token = rng.pick(&TOKENS);
            lines[i] = match lines[i].split_once(':') {
                Some((key, _)) => format!("{key}: {token}"),
                None => format!("{}{token}", lines[i]),
            };
        }
        _ => lines.push(format!("{}: {}", rng.pick(&TOKENS), rng.pick(&TOKENS))),
    }
    *buf = lines.join("\n").into_bytes();
    if rng.one_in(8) {
        mutate_bytes(rng, buf, other, 1 << 16);
    }
}
