//! The simulated ping log: a scenario written in the SkeletonHunter CSV
//! schema (45 columns, hashed ids), or read straight back into pairs.

use super::fabric::Fabric;
use super::rng::hashed;
use super::scenario::{rows, Scenario};
use crate::engine::model::PairStats;
use crate::input::csv::{read_pings_counted, CsvOptions};
use crate::input::probes::ProbesPerRow;
use std::io::Write;

/// The production sample's header (45 columns).
pub const HEADER: &str = "agent_type,dial,dscp,dst_asw,dst_cluster_id,dst_cluster_name,dst_dsw,dst_idc,dst_ip,dst_logic_site,dst_node_id,dst_node_sn,dst_pod,dst_port,dst_real_ip,dst_region_id,dst_region_name,dst_tenant_id,dst_zone_id,extra_stats,host_ip,latency,loss_rate,ping_time,ptp_ts,route,src_asw,src_cluster_id,src_cluster_name,src_dsw,src_idc,src_ip,src_logic_site,src_node_id,src_node_sn,src_pod,src_port,src_real_ip,src_region_id,src_region_name,src_security_domain,src_tenant_id,src_zone_id,task_start_time,task_type";

/// Write the scenario as a SkeletonHunter CSV (with the UTF-8 BOM of the
/// production export).
pub fn write_csv<W: Write>(
    fabric: &Fabric,
    scenario: &Scenario,
    mut out: W,
) -> std::io::Result<()> {
    out.write_all("\u{feff}".as_bytes())?;
    out.write_all(HEADER.as_bytes())?;
    out.write_all(b"\n")?;
    let cluster = hashed("cluster");
    let region = hashed("region");
    let idc = hashed("idc");
    let site = hashed("site");
    let zone = hashed("zone");
    let domain = hashed("domain");
    let mut err = Ok(());
    let mut line = String::with_capacity(1200);
    rows(fabric, scenario, |r| {
        if err.is_err() {
            return;
        }
        use std::fmt::Write as _;
        let (s, d) = (&fabric.nodes[r.src as usize], &fabric.nodes[r.dst as usize]);
        let (sip, dip) = (&fabric.ips[r.src as usize], &fabric.ips[r.dst as usize]);
        line.clear();
        let lat = r.latency_us.map(|l| format!("{l:.3}")).unwrap_or_default();
        let dial = if r.connected { "success" } else { "fail" };
        let _ = writeln!(
            line,
            "overlay,{dial},0,{dt},,{cluster},{dd},{idc},{dip},{site},{dn},{dh},{dp},65300,{dr},{region},{region},{dten},{zone},,{sr},{lat},{loss},{pt},,,{st},,{cluster},{sd},{idc},{sip},{site},{sn},{sh},{sp},{port},{sr},{region},{region},{domain},{sten},{zone},{pt0},RDMA_PING",
            dt = d.tor,
            dd = d.spine,
            dn = d.node,
            dh = d.host,
            dp = d.pod,
            dr = d.nic,
            dten = d.tenant,
            sr = s.nic,
            loss = r.loss_rate,
            pt = r.ping_time,
            st = s.tor,
            sd = s.spine,
            sn = s.node,
            sh = s.host,
            sp = s.pod,
            port = 40000 + (r.ping_time % 20000),
            sten = s.tenant,
            pt0 = r.ping_time - 160_712,
        );
        err = out.write_all(line.as_bytes());
    });
    err?;
    out.flush()
}

/// Aggregate the scenario into pair statistics through the CSV writer and
/// reader at default options: the reader infers the probes per row from
/// the printed `loss_rate` values, as `analyze` does.
pub fn pair_stats(fabric: &Fabric, scenario: &Scenario) -> Vec<PairStats> {
    pair_stats_counted(fabric, scenario).0
}

/// [`pair_stats`], also returning what the reader used as probes per row.
pub fn pair_stats_counted(fabric: &Fabric, scenario: &Scenario) -> (Vec<PairStats>, ProbesPerRow) {
    let mut csv = Vec::new();
    write_csv(fabric, scenario, &mut csv).expect("writing to memory");
    let (pairs, summary) = read_pings_counted(csv.as_slice(), &CsvOptions::default())
        .expect("the simulator writes valid CSV");
    (pairs, summary.probes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::fabric::FabricSpec;
    use crate::sim::scenario::parse_fault;
    use skeletonhunter_common::topology::Kind;

    #[test]
    fn csv_round_trips_through_the_reader() {
        let f = Fabric::new(FabricSpec {
            hosts: 8,
            rails: 2,
            hosts_per_tor: 4,
            ..Default::default()
        });
        let mut sc = Scenario::healthy(5);
        sc.faults
            .push(parse_fault(&f, "node=0:unreachable").unwrap());
        let stats = pair_stats(&f, &sc);
        assert_eq!(stats.len(), f.pairs.len());
        let target = f.components(Kind::Node)[0].id.clone();
        for p in &stats {
            let touches = p.src.node == target || p.dst.node == target;
            assert_eq!(touches, p.failed_dials == p.rounds, "{p:?}");
        }
        assert!(parse_fault(&f, "tor=99:loss").is_err());
        assert!(parse_fault(&f, "tenant=0:loss").is_err());
        assert!(parse_fault(&f, "tor=0:slow").is_err());
        let err = parse_fault(&f, "link=0:loss").unwrap_err();
        assert!(err.to_string().contains("no link components"), "{err}");
    }
}
