//! Probes per CSV row: inferred from the lattice of `loss_rate` values, or
//! read from a count column.

use skeletonhunter_localizer::input::csv::{read_pings_counted, CsvOptions};
use skeletonhunter_localizer::input::probes::ProbeSource;

const HEADER: &str =
    "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,src_asw,dst_asw,extra";

#[test]
fn probes_per_row_come_from_the_rates_or_a_count_column() {
    let body = "a,b,success,10,0.1,1,t,t,x\na,b,success,10,0.2,2,t,t,x\n\
                b,a,success,10,0.1,3,t,t,x\nb,a,success,10,0,4,t,t,x\n";
    let (pairs, summary) = read_pings_counted(
        format!("{HEADER}\n{body}").as_bytes(),
        &CsvOptions::default(),
    )
    .unwrap();
    let probes = summary.probes;
    assert_eq!(probes.value, 10.0);
    assert_eq!(probes.source, ProbeSource::Inferred);
    assert!(probes.confident);
    assert_eq!(probes.distinct_rates, 2);
    assert_eq!((pairs[0].sent, pairs[0].lost), (20.0, 3.0));
    assert_eq!((pairs[1].sent, pairs[1].lost), (20.0, 1.0));

    let counted = "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,probe_count\n\
                   a,b,success,10,0.25,1,4\na,b,success,10,0,2,8\n";
    let (pairs, summary) = read_pings_counted(counted.as_bytes(), &CsvOptions::default()).unwrap();
    let probes = summary.probes;
    assert_eq!(probes.source, ProbeSource::Column);
    assert_eq!((pairs[0].sent, pairs[0].lost), (12.0, 1.0));

    // Nothing lost anywhere: nothing to infer from, and nothing to warn.
    let (_, summary) = read_pings_counted(
        format!("{HEADER}\na,b,success,10,0,1,t,t,x\n").as_bytes(),
        &CsvOptions::default(),
    )
    .unwrap();
    let probes = summary.probes;
    assert_eq!(probes.source, ProbeSource::Default);
    assert!(!probes.confident && !probes.matters);
}
