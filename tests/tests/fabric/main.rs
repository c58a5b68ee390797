//! Scenarios on namespace fabrics beyond the end-to-end one: multipath and
//! path tracing, RDMA probing, the VXLAN overlay, a rollout and a job that
//! ends, host noise that must not page. One test binary; a module per
//! scenario (`e2e` runs alone, after the others).

mod host_noise;
mod job_lifecycle;
mod multipath;
mod overlay;
mod rdma;
mod traceroute;
