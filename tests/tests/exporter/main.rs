//! The exporter binary on real packets between network namespaces and on
//! loopback: probing, the responder, peers, identity and topology, native
//! histograms, least privilege, hostile input and abuse of its resources.
//! One test binary; a module per concern.

mod hostile;
mod identity;
mod native_histograms;
mod peers;
mod privileges;
mod probing;
mod responder;
mod responder_guard;
mod robustness;
mod topology;
