// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// SkeletonHunter discovery programs, loaded by the exporter with aya.
//
// * `tcp_state` (tracepoint sock/inet_sock_set_state): reports TCP
//   connections reaching and leaving ESTABLISHED, IPv4 and IPv6, with the
//   socket's cgroup and network namespace, so user space can learn which
//   remote endpoints a training container keeps talking to.
// * `ibv_modify_qp` (uprobe on libibverbs): reports RDMA queue pairs moving to
//   RTR, with the remote QPN and GID, so RDMA peers are discovered too (RDMA
//   traffic never shows up as TCP state changes); `ibv_destroy_qp` reports
//   the end of a queue pair, like a TCP close.
//
// Both write fixed-size `struct sh_event` records to one ring buffer; when it
// is full the event is counted in `dropped` instead of being lost silently.
// `struct sh_event` lives in discovery.h, mirrored by
// exporter/src/wire/discovery.rs; both assert the same layout.

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "discovery.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TCP_ESTABLISHED 1
#define IPPROTO_TCP_ 6
#define AF_INET_ 2
#define AF_INET6_ 10

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

// Index 0: events lost because the ring buffer was full.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

// Set by the loader: report only sockets of this network namespace (inode);
// 0 reports every namespace (a host-level exporter watching all pods).
volatile const __u32 filter_netns = 0;

// Minimal kernel types, relocated against the running kernel's BTF (CO-RE),
// so no vmlinux.h is needed and field offsets follow the kernel.
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct sock_cgroup_data {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct sock_common {
	possible_net_t skc_net;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	struct sock_cgroup_data sk_cgrp_data;
} __attribute__((preserve_access_index));

// Layout of the tracepoint record, from
// /sys/kernel/tracing/events/sock/inet_sock_set_state/format (stable ABI
// since Linux 4.16).
struct inet_sock_set_state_args {
	__u64 common;
	const void *skaddr;
	int oldstate;
	int newstate;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u16 protocol;
	__u8 saddr[4];
	__u8 daddr[4];
	__u8 saddr_v6[16];
	__u8 daddr_v6[16];
};

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&dropped, &zero);
	if (n)
		*n += 1;
}

SEC("tracepoint/sock/inet_sock_set_state")
int tcp_state(struct inet_sock_set_state_args *ctx)
{
	if (ctx->protocol != IPPROTO_TCP_)
		return 0;
	__u8 kind;
	if (ctx->newstate == TCP_ESTABLISHED)
		kind = SH_TCP_UP;
	else if (ctx->oldstate == TCP_ESTABLISHED)
		kind = SH_TCP_DOWN;
	else
		return 0;

	struct sock *sk = (struct sock *)ctx->skaddr;
	__u32 netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	if (filter_netns != 0 && netns != filter_netns)
		return 0;

	struct sh_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop();
		return 0;
	}
	e->ts_ns = bpf_ktime_get_ns();
	// The socket's own cgroup: the state change to ESTABLISHED often runs in
	// softirq context, where the current task is unrelated to the socket.
	e->cgroup_id = BPF_CORE_READ(sk, sk_cgrp_data.cgroup, kn, id);
	e->handle = (__u64)(unsigned long)sk;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->netns = netns;
	e->kind = kind;
	e->lport = ctx->sport;
	e->rport = ctx->dport;
	e->dlid = 0;
	e->qpn = 0;
	e->local_qpn = 0;
	if (ctx->family == AF_INET6_) {
		e->family = 6;
		__builtin_memcpy(e->laddr, ctx->saddr_v6, 16);
		__builtin_memcpy(e->raddr, ctx->daddr_v6, 16);
	} else {
		e->family = 4;
		__builtin_memset(e->laddr, 0, 16);
		__builtin_memset(e->raddr, 0, 16);
		__builtin_memcpy(e->laddr, ctx->saddr, 4);
		__builtin_memcpy(e->raddr, ctx->daddr, 4);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

// struct ibv_qp_attr / struct ibv_qp offsets of the libibverbs ABI
// (<infiniband/verbs.h>, unchanged since rdma-core v13); the uprobe test
// checks them against the real header.
#define IBV_QP_ATTR_QP_STATE 0
#define IBV_QP_ATTR_DEST_QP_NUM 28
#define IBV_QP_ATTR_AH_DGID 56
#define IBV_QP_ATTR_AH_DLID 80
#define IBV_QP_QP_NUM 52
#define IBV_QP_STATE_MASK 1
#define IBV_QPS_RTR 2

// A zeroed event about queue pair `qp` of the calling task, or NULL (counted
// in `dropped`) when the ring buffer is full. Both uprobes report the same
// identity; only what follows differs.
static __always_inline struct sh_event *reserve_qp_event(const void *qp, __u8 kind)
{
	struct sh_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop();
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->handle = (__u64)(unsigned long)qp;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->kind = kind;
	return e;
}

SEC("uprobe/ibv_modify_qp")
int ibv_modify_qp(struct pt_regs *ctx)
{
	const void *qp = (const void *)PT_REGS_PARM1(ctx);
	const void *attr = (const void *)PT_REGS_PARM2(ctx);
	int mask = (int)PT_REGS_PARM3(ctx);
	if (!(mask & IBV_QP_STATE_MASK) || !attr)
		return 0;
	__u32 state = 0;
	if (bpf_probe_read_user(&state, sizeof(state), attr + IBV_QP_ATTR_QP_STATE))
		return 0;
	if (state != IBV_QPS_RTR)
		return 0;

	struct sh_event *e = reserve_qp_event(qp, SH_RDMA_RTR);
	if (!e)
		return 0;
	bpf_probe_read_user(&e->qpn, sizeof(e->qpn), attr + IBV_QP_ATTR_DEST_QP_NUM);
	bpf_probe_read_user(&e->dlid, sizeof(e->dlid), attr + IBV_QP_ATTR_AH_DLID);
	bpf_probe_read_user(e->raddr, 16, attr + IBV_QP_ATTR_AH_DGID);
	if (qp)
		bpf_probe_read_user(&e->local_qpn, sizeof(e->local_qpn), qp + IBV_QP_QP_NUM);
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("uprobe/ibv_destroy_qp")
int ibv_destroy_qp(struct pt_regs *ctx)
{
	const void *qp = (const void *)PT_REGS_PARM1(ctx);
	if (!qp)
		return 0;
	struct sh_event *e = reserve_qp_event(qp, SH_RDMA_DESTROY);
	if (!e)
		return 0;
	bpf_ringbuf_submit(e, 0);
	return 0;
}
