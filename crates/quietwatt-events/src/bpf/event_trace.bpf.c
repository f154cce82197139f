// SPDX-License-Identifier: MIT OR GPL-2.0
//
// quietwatt's full event trace (`record --events ... --full-trace`): every C-state
// entry and exit, context switch and page fault as one record in a BPF ring
// buffer, stamped in the kernel with bpf_ktime_get_ns (CLOCK_MONOTONIC, the clock
// of the energy samples). User space drains the ring at the events thread's rate
// (10 Hz by default): no wake-up per event.
//
// The counting programs (cpu_idle.bpf.c, perf counters) stay the cheap default;
// this one costs a ring record per event and is loaded only when asked for.
//
// Attach points, all usable without kprobes:
//   raw_tracepoint/cpu_idle      power:cpu_idle (args: state, cpu_id); BPF sees it
//                                on every CPU where perf and ftrace miss CPU 1
//   raw_tracepoint/sched_switch  sched:sched_switch (fires on the switching CPU,
//                                while `current` is still the task leaving)
//   perf_event (x2)              software events PAGE_FAULTS_MIN / _MAJ with a
//                                sample period of 1, one per CPU: the fault kind
//                                is known, which a fault tracepoint does not say
//
// Plain C on <linux/bpf.h> and libbpf's headers: no vmlinux.h, no CO-RE.

#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

// Record kinds; user space names them as the counted events are named.
#define QW_TRACE_IDLE 1
#define QW_TRACE_SWITCH 2
#define QW_TRACE_FAULT_MIN 3
#define QW_TRACE_FAULT_MAJ 4

// One event. 24 bytes (+ the ring's 8-byte header).
struct qw_trace_rec {
	// bpf_ktime_get_ns: CLOCK_MONOTONIC.
	__u64 t_ns;
	// The CPU the event is about (cpu_idle's cpu_id; else the running CPU).
	__u32 cpu;
	// QW_TRACE_*.
	__u32 kind;
	// Idle: the state (0xffffffff: exit). Switch and faults: the pid of the task
	// running (the one leaving, for a switch).
	__u64 arg;
};

// Sized by user space before loading (a power of two, a multiple of the page).
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} trace SEC(".maps");

// Records the ring had no room for: reported, never silent.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} dropped SEC(".maps");

static __always_inline void emit(__u32 cpu, __u32 kind, __u64 arg)
{
	struct qw_trace_rec *r = bpf_ringbuf_reserve(&trace, sizeof(*r), 0);
	if (!r) {
		__u32 zero = 0;
		__u64 *d = bpf_map_lookup_elem(&dropped, &zero);
		if (d)
			__sync_fetch_and_add(d, 1);
		return;
	}
	r->t_ns = bpf_ktime_get_ns();
	r->cpu = cpu;
	r->kind = kind;
	r->arg = arg;
	// No wake-up: user space polls on its own clock, so a record never wakes it.
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

SEC("raw_tracepoint/cpu_idle")
int qw_trace_idle(struct bpf_raw_tracepoint_args *ctx)
{
	emit((__u32)ctx->args[1], QW_TRACE_IDLE, (__u32)ctx->args[0]);
	return 0;
}

SEC("raw_tracepoint/sched_switch")
int qw_trace_switch(struct bpf_raw_tracepoint_args *ctx)
{
	emit(bpf_get_smp_processor_id(), QW_TRACE_SWITCH,
	     (__u32)bpf_get_current_pid_tgid());
	return 0;
}

SEC("perf_event")
int qw_trace_fault_min(struct bpf_perf_event_data *ctx)
{
	emit(bpf_get_smp_processor_id(), QW_TRACE_FAULT_MIN,
	     (__u32)bpf_get_current_pid_tgid());
	// 0: the perf event writes no sample of its own (it has no ring anyway).
	return 0;
}

SEC("perf_event")
int qw_trace_fault_maj(struct bpf_perf_event_data *ctx)
{
	emit(bpf_get_smp_processor_id(), QW_TRACE_FAULT_MAJ,
	     (__u32)bpf_get_current_pid_tgid());
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
