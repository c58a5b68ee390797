//! `/proc/net/snmp`: the kernel's protocol counters of this network
//! namespace, as pairs of lines (`Udp: InDatagrams NoPorts …` then
//! `Udp: 123 4 …`). The exporter reads UDP `RcvbufErrors`, datagrams any
//! UDP socket of the host dropped for a full receive buffer.

use skeletonhunter_common::recent::Recent;
use std::time::Duration;

/// The counter `field` of protocol `proto` (`"Udp"`, `"Ip"`, …) in the
/// text of `/proc/net/snmp`; `None` when absent or not a number.
pub fn parse_field(text: &str, proto: &str, field: &str) -> Option<u64> {
    let prefix = format!("{proto}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let i = names.split_whitespace().position(|n| n == field);
        if let Some(i) = i {
            return values.split_whitespace().nth(i)?.parse().ok();
        }
    }
    None
}

/// UDP `RcvbufErrors` of this network namespace, `None` when
/// `/proc/net/snmp` can not be read; read at most once a second however
/// many registries render (see `skeletonhunter_common::recent`).
pub fn udp_rcvbuf_errors() -> Option<u64> {
    static LAST: Recent<Option<u64>> = Recent::new(Duration::from_secs(1));
    LAST.get(|| {
        let text = std::fs::read_to_string("/proc/net/snmp").ok()?;
        parse_field(&text, "Udp", "RcvbufErrors")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives
Ip: 1 64 12345
Icmp: InMsgs InErrors
Icmp: 10 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 5117 40 12 5083 7 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 99 0 0 0 0
";

    #[test]
    fn reads_udp_rcvbuf_errors_not_udplite() {
        assert_eq!(parse_field(SNMP, "Udp", "RcvbufErrors"), Some(7));
        assert_eq!(parse_field(SNMP, "UdpLite", "RcvbufErrors"), Some(99));
        assert_eq!(parse_field(SNMP, "Ip", "InReceives"), Some(12345));
    }

    #[test]
    fn missing_or_broken_fields_are_none() {
        assert_eq!(parse_field(SNMP, "Udp", "NoSuchField"), None);
        assert_eq!(parse_field(SNMP, "Tcp", "RcvbufErrors"), None);
        assert_eq!(parse_field("", "Udp", "RcvbufErrors"), None);
        let header_only = "Udp: InDatagrams RcvbufErrors\n";
        assert_eq!(parse_field(header_only, "Udp", "RcvbufErrors"), None);
        let short = "Udp: InDatagrams RcvbufErrors\nUdp: 5\n";
        assert_eq!(parse_field(short, "Udp", "RcvbufErrors"), None);
        let garbage = "Udp: InDatagrams RcvbufErrors\nUdp: 5 x\n";
        assert_eq!(parse_field(garbage, "Udp", "RcvbufErrors"), None);
    }

    #[test]
    fn this_host_has_the_counter() {
        // Linux has had Udp RcvbufErrors since 2.6.
        if std::path::Path::new("/proc/net/snmp").exists() {
            assert!(udp_rcvbuf_errors().is_some());
        }
    }
}
