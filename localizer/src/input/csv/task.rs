//! The `task_type` column: which kind of probe a row is. A SkeletonHunter
//! log interleaves RDMA pings, TCP pings and traceroutes between the same
//! containers. Pooled, a pair's median RTT would mix an RDMA round trip with
//! a TCP one (tens of microseconds apart) and a traceroute's hop times would
//! count as probe rounds; kept apart, each protocol's rounds are their own
//! series (departures, medians) and the pair takes its RTT from the protocol
//! closest to what training traffic sees ([`Protocol::rtt_preference`]).
//!
//! `agent_type` says which network a row measured ([`Plane`]): overlay rows
//! (container to container) and underlay rows (host to host) are different
//! pairs, analyzed apart and then set against each other.

use serde::Serialize;
use skeletonhunter_common::topology::Plane;
use skeletonhunter_common::Protocol;

/// What one row is, by its `task_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// A probe round of this protocol; `None` when the log does not say
    /// (no `task_type` column, or an empty field).
    Probe(Option<Protocol>),
    /// A path trace: its latency is a hop's, not the pair's, so it is
    /// counted and skipped.
    Trace,
}

/// A `task_type` value that names no probe this reader knows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{0:?} is not a task type this reader knows (one starting with RDMA, TCP, UDP, ICMP or TRACE, \
     in any case, e.g. RDMA_PING, TCP_PING, TRACEROUTE; or empty)"
)]
pub struct UnknownTask(pub String);

impl Task {
    /// The task of a `task_type` field, by its prefix in any case: the
    /// SkeletonHunter schema calls its values RDMA, TCP and traceroute
    /// pings without fixing their spelling.
    pub fn parse(field: &[u8]) -> Result<Task, UnknownTask> {
        let f = field.trim_ascii();
        if f.is_empty() {
            return Ok(Task::Probe(None));
        }
        let starts = |p: &[u8]| f.len() >= p.len() && f[..p.len()].eq_ignore_ascii_case(p);
        let protocol = if starts(b"RDMA") {
            Protocol::Rdma
        } else if starts(b"TCP") {
            Protocol::Tcp
        } else if starts(b"UDP") {
            Protocol::Udp
        } else if starts(b"ICMP") {
            Protocol::Icmp
        } else if starts(b"TRACE") {
            return Ok(Task::Trace);
        } else {
            return Err(UnknownTask(String::from_utf8_lossy(f).into_owned()));
        };
        Ok(Task::Probe(Some(protocol)))
    }
}

/// An `agent_type` value that is neither plane.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0:?} is not a plane (overlay or underlay, in any case; or empty)")]
pub struct UnknownPlane(pub String);

/// The plane of an `agent_type` field; `None` when empty.
pub fn plane(field: &[u8]) -> Result<Option<Plane>, UnknownPlane> {
    let f = field.trim_ascii();
    if f.is_empty() {
        return Ok(None);
    }
    Plane::ALL
        .into_iter()
        .find(|p| f.eq_ignore_ascii_case(p.as_str().as_bytes()))
        .map(Some)
        .ok_or_else(|| UnknownPlane(String::from_utf8_lossy(f).into_owned()))
}

/// RTT preference of a probe row's protocol: the protocol's own
/// ([`Protocol::rtt_preference`]), rows that do not say last.
pub fn rtt_preference(protocol: Option<Protocol>) -> u8 {
    protocol.map_or(u8::MAX, Protocol::rtt_preference)
}

/// How many rows of each task the log held; the `task_rows` object of the
/// analyze JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskRows {
    /// Probe rows per protocol, by [`Protocol::index`].
    probes: [u64; Protocol::ALL.len()],
    /// Probe rows that do not say their protocol.
    pub unspecified: u64,
    /// Path-trace rows, skipped.
    pub traceroute: u64,
}

impl TaskRows {
    /// Count one row.
    #[inline(always)]
    pub fn add(&mut self, task: Task) {
        match task {
            Task::Probe(Some(p)) => self.probes[p.index()] += 1,
            Task::Probe(None) => self.unspecified += 1,
            Task::Trace => self.traceroute += 1,
        }
    }

    /// Probe rows of `protocol`.
    pub fn probes(&self, protocol: Protocol) -> u64 {
        self.probes[protocol.index()]
    }
}

impl Serialize for TaskRows {
    /// `{"probes": {"rdma": N, ...}, "unspecified": N, "traceroute": N}`,
    /// naming only the protocols the log had.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let probes: std::collections::BTreeMap<&str, u64> = Protocol::ALL
            .into_iter()
            .filter(|p| self.probes(*p) > 0)
            .map(|p| (p.as_str(), self.probes(p)))
            .collect();
        let mut st = s.serialize_struct("TaskRows", 3)?;
        st.serialize_field("probes", &probes)?;
        st.serialize_field("unspecified", &self.unspecified)?;
        st.serialize_field("traceroute", &self.traceroute)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_types_are_read_by_prefix_in_any_case() {
        for (field, want) in [
            (&b"RDMA_PING"[..], Task::Probe(Some(Protocol::Rdma))),
            (b"rdma", Task::Probe(Some(Protocol::Rdma))),
            (b" TCP_PING ", Task::Probe(Some(Protocol::Tcp))),
            (b"Udp_Ping", Task::Probe(Some(Protocol::Udp))),
            (b"ICMP_PING", Task::Probe(Some(Protocol::Icmp))),
            (b"TRACEROUTE", Task::Trace),
            (b"Traceroute", Task::Trace),
            (b"", Task::Probe(None)),
        ] {
            assert_eq!(Task::parse(field), Ok(want), "{field:?}");
        }
        let e = Task::parse(b"HTTP_GET").unwrap_err();
        assert_eq!(e, UnknownTask("HTTP_GET".into()));
        assert!(e.to_string().contains("RDMA"), "{e}");
    }

    #[test]
    fn planes_are_read_in_any_case() {
        assert_eq!(plane(b"overlay"), Ok(Some(Plane::Overlay)));
        assert_eq!(plane(b" UNDERLAY"), Ok(Some(Plane::Underlay)));
        assert_eq!(plane(b""), Ok(None));
        assert_eq!(plane(b"vpc"), Err(UnknownPlane("vpc".into())));
    }

    #[test]
    fn rdma_is_preferred_for_rtt_and_unspecified_rows_come_last() {
        let (rdma, tcp) = (Some(Protocol::Rdma), Some(Protocol::Tcp));
        assert!(rtt_preference(rdma) < rtt_preference(tcp));
        assert!(rtt_preference(tcp) < rtt_preference(None));
    }

    #[test]
    fn rows_are_counted_per_task() {
        let mut rows = TaskRows::default();
        for t in [
            Task::Probe(Some(Protocol::Rdma)),
            Task::Probe(Some(Protocol::Rdma)),
            Task::Trace,
            Task::Probe(None),
        ] {
            rows.add(t);
        }
        assert_eq!(rows.probes(Protocol::Rdma), 2);
        assert_eq!((rows.unspecified, rows.traceroute), (1, 1));
        let json = serde_json::to_string(&rows).unwrap();
        assert_eq!(
            json,
            r#"{"probes":{"rdma":2},"unspecified":1,"traceroute":1}"#
        );
    }
}
