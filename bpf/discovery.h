// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// The record the discovery programs write to their ring buffer. The
// exporter mirrors it as the `#[repr(C)]` struct `ShEvent` in
// exporter/src/wire/discovery.rs, which asserts the same size and field
// offsets as the `_Static_assert`s below: change both together.

#ifndef SKELETONHUNTER_DISCOVERY_H
#define SKELETONHUNTER_DISCOVERY_H

#include <linux/types.h>

#define SH_TCP_UP 1
#define SH_TCP_DOWN 2
#define SH_RDMA_RTR 3
#define SH_RDMA_DESTROY 4

struct sh_event {
	__u64 ts_ns;      // bpf_ktime_get_ns (CLOCK_MONOTONIC)
	__u64 cgroup_id;  // cgroup v2 id of the socket (TCP) or caller (RDMA)
	__u64 handle;     // struct sock * (TCP) or struct ibv_qp * (RDMA): identity while alive
	__u32 pid;        // tgid of the current task (0 in softirq context is possible)
	__u32 netns;      // network namespace inode of the socket (TCP), 0 for RDMA
	__u8 kind;        // SH_TCP_UP, SH_TCP_DOWN, SH_RDMA_RTR, SH_RDMA_DESTROY
	__u8 family;      // 4 or 6 (TCP); 0 for RDMA
	__u16 lport;      // host byte order
	__u16 rport;      // host byte order
	__u16 dlid;       // RDMA: destination LID
	__u32 qpn;        // RDMA: remote (destination) QP number
	__u32 local_qpn;  // RDMA: this QP's number
	__u8 laddr[16];   // TCP: local address (IPv4 in the first 4 bytes)
	__u8 raddr[16];   // TCP: remote address; RDMA: destination GID
};

_Static_assert(sizeof(struct sh_event) == 80, "sh_event size");
_Static_assert(__builtin_offsetof(struct sh_event, cgroup_id) == 8, "cgroup_id");
_Static_assert(__builtin_offsetof(struct sh_event, handle) == 16, "handle");
_Static_assert(__builtin_offsetof(struct sh_event, pid) == 24, "pid");
_Static_assert(__builtin_offsetof(struct sh_event, netns) == 28, "netns");
_Static_assert(__builtin_offsetof(struct sh_event, kind) == 32, "kind");
_Static_assert(__builtin_offsetof(struct sh_event, family) == 33, "family");
_Static_assert(__builtin_offsetof(struct sh_event, lport) == 34, "lport");
_Static_assert(__builtin_offsetof(struct sh_event, rport) == 36, "rport");
_Static_assert(__builtin_offsetof(struct sh_event, dlid) == 38, "dlid");
_Static_assert(__builtin_offsetof(struct sh_event, qpn) == 40, "qpn");
_Static_assert(__builtin_offsetof(struct sh_event, local_qpn) == 44, "local_qpn");
_Static_assert(__builtin_offsetof(struct sh_event, laddr) == 48, "laddr");
_Static_assert(__builtin_offsetof(struct sh_event, raddr) == 64, "raddr");

#endif
