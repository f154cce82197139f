// SPDX-License-Identifier: MIT OR GPL-2.0
//
// quietwatt's in-kernel sampler (`--mechanism ebpf`, paper 002 section III-F).
//
// A cpu-clock perf event fires this program at the sampling rate on one CPU per
// RAPL scope (the `power` PMU's cpumask CPU). It reads that CPU's energy events
// from `events` (a PERF_EVENT_ARRAY filled by user space) with
// bpf_perf_event_read_value and writes one fixed-size record to the `samples`
// ring buffer. User space drains the ring at a low rate (1 Hz by default), so
// 1000 samples a second cost one user-space wake-up a second.
//
// Plain C on <linux/bpf.h> and libbpf's bpf_helpers.h: no vmlinux.h, no CO-RE,
// nothing read from kernel structures, so the object loads on any kernel with
// BPF ring buffers (5.8+) and bounded loops (5.3+).
//
// The number of events per CPU is data (the `groups` map), not code: one object
// serves any number of domains up to QW_MAX_DOMAINS, without recompiling (paper
// 002's program switched on the number of domains and had to be edited for each).

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// The most events one CPU reads per sample; user space checks it before loading.
#define QW_MAX_DOMAINS 16

// One sample, as user space reads it from the ring. Every field is written before
// the record is submitted: the ring's memory is not zeroed by the kernel.
struct qw_sample {
	// bpf_ktime_get_ns(): CLOCK_MONOTONIC, the clock of user-space timestamps.
	__u64 t_ns;
	// This CPU's run count when the sample was taken: a gap between two records
	// of one CPU is the number of samples the full ring dropped.
	__u64 seq;
	__u32 cpu;
	// Values filled (the rest of `values` is zero).
	__u32 n;
	// Bit i set: value i could not be read (its slot holds 0, not a reading).
	__u32 failed;
	__u32 pad;
	// Raw 64-bit perf counts, in the order of the CPU's slots in `events`.
	__u64 values[QW_MAX_DOMAINS];
};

// What the program needs to know about the CPU it runs on.
struct qw_group {
	// Events to read on this CPU; 0: not a sampling CPU.
	__u32 n;
	// Index of the first of them in `events`.
	__u32 base;
	// Bytes waiting in the ring at which this sample wakes user space early (the
	// ring's watermark); 0: never (user space drains on its timer only).
	__u64 wake_at;
};

// Counters kept per CPU, summed by user space: no atomics on the sampling path.
struct qw_stats {
	// Program runs (samples taken).
	__u64 taken;
	// Samples lost because the ring was full.
	__u64 dropped;
	// Events that could not be read.
	__u64 read_errors;
	// Samples that woke user space early (the ring passed its watermark).
	__u64 wakeups;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	// Sized by user space before loading: every event of every sampling CPU.
	__uint(max_entries, 1);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct qw_group);
	// Sized by user space before loading: one entry per possible CPU.
	__uint(max_entries, 1);
} groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	// Sized by user space before loading: several drain periods of samples.
	__uint(max_entries, 4096);
} samples SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct qw_stats);
	__uint(max_entries, 1);
} stats SEC(".maps");

SEC("perf_event")
int qw_sample(void *ctx)
{
	__u32 zero = 0;
	struct qw_stats *st = bpf_map_lookup_elem(&stats, &zero);
	if (!st)
		return 0;
	// A perf-event program does not nest on its CPU, and the map is per CPU:
	// plain increments are exact.
	st->taken++;

	__u32 cpu = bpf_get_smp_processor_id();
	struct qw_group *g = bpf_map_lookup_elem(&groups, &cpu);
	if (!g || g->n == 0)
		return 0;

	struct qw_sample *s = bpf_ringbuf_reserve(&samples, sizeof(*s), 0);
	if (!s) {
		st->dropped++;
		return 0;
	}
	// The time before the reads, as the polling sampler does.
	s->t_ns = bpf_ktime_get_ns();
	s->seq = st->taken;
	s->cpu = cpu;
	s->n = g->n;
	s->failed = 0;
	s->pad = 0;
	for (__u32 i = 0; i < QW_MAX_DOMAINS; i++) {
		struct bpf_perf_event_value v;

		s->values[i] = 0;
		if (i >= g->n)
			continue;
		// The event must be on this CPU (perf_event_read_local refuses others),
		// which is why the program runs on the events' own CPU.
		if (bpf_perf_event_read_value(&events, g->base + i, &v, sizeof(v))) {
			s->failed |= 1u << i;
			st->read_errors++;
			continue;
		}
		s->values[i] = v.counter;
	}

	// No wake-up per sample (that would be an irq_work and a user-space wake-up
	// 1000 times a second); only when the ring passes its watermark.
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (g->wake_at && bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >= g->wake_at) {
		flags = BPF_RB_FORCE_WAKEUP;
		st->wakeups++;
	}
	bpf_ringbuf_submit(s, flags);
	return 0;
}

// bpf_perf_event_read_value is a GPL-only helper: the program must declare a
// GPL-compatible license. The kernel accepts "Dual MIT/GPL".
char LICENSE[] SEC("license") = "Dual MIT/GPL";
