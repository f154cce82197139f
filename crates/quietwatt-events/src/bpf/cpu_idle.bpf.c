// SPDX-License-Identifier: MIT OR GPL-2.0
//
// quietwatt's C-state counter (`record --events cstate`): counts entries and
// nanoseconds per CPU per idle state from the power:cpu_idle tracepoint, in the
// kernel, in a map user space reads with plain loads (BPF_F_MMAPABLE): no event
// ever crosses to user space.
//
// Why BPF: on some kernels and VMs (this project's: 6.18, haltpoll) the perf and
// ftrace consumers of power:cpu_idle see nothing on an idle vCPU other than CPU 0,
// while a BPF program attached to the same tracepoint sees every CPU.
//
// The same handler under three attach types; user space loads one at a time, in
// this order, and keeps the first that loads and attaches:
//   tp_btf/cpu_idle          BTF-typed raw tracepoint (needs vmlinux BTF, 5.5+)
//   raw_tracepoint/cpu_idle  raw tracepoint, untyped u64 arguments (4.17+)
//   tracepoint/power/cpu_idle the classic tracepoint, perf-based (4.7+)
// tp_btf and raw_tracepoint hand over the TP_PROTO arguments (state, cpu_id);
// the classic tracepoint hands over the trace record (common header, then the
// fields).
//
// Plain C on <linux/bpf.h> and libbpf's bpf_helpers.h: no vmlinux.h, no CO-RE.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// Idle states counted one by one; a state index at or above this lands in `other`.
#define QW_IDLE_STATES 10
// PWR_EVENT_EXIT: the `state` of an idle exit.
#define QW_IDLE_EXIT 0xffffffffu

// One CPU's counters. Only the program running on that CPU writes them (the
// tracepoint fires on the CPU that idles, with preemption off), so plain
// increments are exact; user space only reads.
struct qw_idle_cpu {
	// Entries per state.
	__u64 entries[QW_IDLE_STATES];
	// Nanoseconds per state, entry to exit (bpf_ktime_get_ns: CLOCK_MONOTONIC).
	__u64 ns[QW_IDLE_STATES];
	// Exits.
	__u64 exits;
	// Entries into a state >= QW_IDLE_STATES.
	__u64 other;
	// When the current idle period began; 0 when the CPU is not idle.
	__u64 enter_ns;
	// The state of the current idle period.
	__u64 state;
};

// Indexed by CPU number; sized by user space to the possible CPUs before loading.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct qw_idle_cpu);
	__uint(max_entries, 1);
} idle SEC(".maps");

static __always_inline void on_cpu_idle(__u32 state, __u32 cpu)
{
	struct qw_idle_cpu *c = bpf_map_lookup_elem(&idle, &cpu);
	if (!c)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (state == QW_IDLE_EXIT) {
		c->exits++;
		if (c->enter_ns) {
			__u64 s = c->state;
			if (s < QW_IDLE_STATES)
				c->ns[s] += now - c->enter_ns;
			c->enter_ns = 0;
		}
		return;
	}
	if (state < QW_IDLE_STATES)
		c->entries[state]++;
	else
		c->other++;
	c->state = state;
	c->enter_ns = now;
}

SEC("tp_btf/cpu_idle")
int qw_idle_btf(__u64 *ctx)
{
	on_cpu_idle((__u32)ctx[0], (__u32)ctx[1]);
	return 0;
}

SEC("raw_tracepoint/cpu_idle")
int qw_idle_raw(struct bpf_raw_tracepoint_args *ctx)
{
	on_cpu_idle((__u32)ctx->args[0], (__u32)ctx->args[1]);
	return 0;
}

// The classic tracepoint's record: the 8-byte common header, then the fields as
// events/power/cpu_idle/format lists them (u32 state at 8, u32 cpu_id at 12).
struct qw_cpu_idle_record {
	__u64 common;
	__u32 state;
	__u32 cpu_id;
};

// Returns 1: a classic tracepoint program that returns 0 makes the kernel drop the
// event for every perf consumer of the tracepoint (perf_trace_run_bpf_submit), which
// would blind quietwatt's own perf counters on power:cpu_idle (measured: perf then
// counted 0 on CPU 0 against cpuidle's 497).
SEC("tracepoint/power/cpu_idle")
int qw_idle_tp(struct qw_cpu_idle_record *ctx)
{
	on_cpu_idle(ctx->state, ctx->cpu_id);
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
