//! Peer discovery on real traffic: the eBPF programs (TCP tracepoint, RDMA
//! uprobe) loaded for real, and the exporter learning and forgetting its
//! skeleton peers from connections between network namespaces. One test
//! binary; a module per concern.

mod tcp_trace;
mod traffic;
mod uprobe;
