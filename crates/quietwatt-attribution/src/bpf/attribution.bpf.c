// SPDX-License-Identifier: MIT OR GPL-2.0
//
// quietwatt's attribution accounting: who ran on each CPU, and from when to when,
// at context-switch granularity, for splitting each energy sample among what ran.
//
// On every sched_switch the slice that ends (the task leaving ran on this CPU
// since the previous switch) goes to user space as one 56-byte record in a BPF
// ring buffer: start, end, the leaving task's process (tgid) and cgroup v2 id.
// The task arriving is written into a per-CPU slot (a BPF_F_MMAPABLE array user
// space reads with plain loads) with the slice's start, so that user space knows
// who is running *now* on a CPU that does not switch for a long time (a lone busy
// loop, an idle CPU): nothing has to switch for an interval to be attributed.
//
// The idle task's slices are not written: when the idle task leaves, its start
// stays in the slot (`idle_from_ns`) and goes out with the record of the task
// that follows it. A CPU that alternates between a task and idle (a task that
// blocks, a wake-up from another CPU) so writes one record per round instead of
// two: the ring write is half the program's cost. An idle period whose next
// record the ring drops is lost with it (counted as unseen, never as a task's).
//
// Why slices rather than per-entity sums in a hash map: the energy samples are
// taken by another thread at their own times; a slice stamped in the kernel on
// CLOCK_MONOTONIC (the energy samples' clock) is split at each sample's exact
// boundary in user space, with no read-and-reset race and no syscall per entity.
//
// The arriving task's identity needs its task_struct: read with direct loads from
// the tp_btf argument, whose field offsets are CO-RE relocations (the local structs
// below are relocated against the kernel's BTF by libbpf), so the program needs a
// kernel with BTF (/sys/kernel/btf/vmlinux). Direct loads cost no helper call: they
// replaced BPF_CORE_READ (bpf_probe_read_kernel), 344 -> 205 ns per switch. Plain C on
// <linux/bpf.h> and libbpf's headers: no vmlinux.h.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct task_struct {
	int tgid;
	struct css_set *cgroups;
} __attribute__((preserve_access_index));

// One slice: `tgid` (0: the idle task) ran on `cpu` from `start_ns` to `end_ns`
// (bpf_ktime_get_ns, CLOCK_MONOTONIC), in cgroup `cgid` (its v2 id, the inode of
// its directory); `comm` is the thread's name, so that a process that has exited
// by the time user space names it still has one.
struct qw_slice {
	__u64 start_ns;
	__u64 end_ns;
	__u64 cgid;
	// The idle task ran on `cpu` from here to `start_ns` (0: it did not).
	__u64 idle_from_ns;
	__u32 tgid;
	__u32 cpu;
	char comm[16];
};

// What runs on a CPU now, since `start_ns` (0: not known yet). `seq` is odd while
// the program writes the slot: user space rereads until it sees the same even
// value before and after.
struct qw_running {
	__u64 seq;
	__u64 start_ns;
	__u64 cgid;
	// The idle task ran here from `idle_from_ns` to `start_ns` (0: it did not).
	__u64 idle_from_ns;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 23);
} slices SEC(".maps");

// Indexed by CPU; sized by user space to the possible CPUs before loading.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct qw_running);
	__uint(max_entries, 1);
} running SEC(".maps");

// Slices the ring had no room for: their time is reported unattributed.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} dropped SEC(".maps");

// The processes descended from one (a command's tree where no cgroup can be made
// for it): each new process whose parent is in the map goes in with its parent's
// tgid as value; user space puts the root in and reads the tree back. Sized by
// user space (1 entry and not loaded when unused).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} tree SEC(".maps");

SEC("tp_btf/sched_process_fork")
int qw_attr_fork(__u64 *ctx)
{
	// TP_PROTO(struct task_struct *parent, struct task_struct *child)
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	__u32 ptgid = parent->tgid;
	__u32 ctgid = child->tgid;
	// A new thread joins its process's tgid: only a new process is a new entity.
	if (ctgid == ptgid || !bpf_map_lookup_elem(&tree, &ptgid))
		return 0;
	bpf_map_update_elem(&tree, &ctgid, &ptgid, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_switch")
int qw_attr_switch(__u64 *ctx)
{
	// TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, ...)
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 cpu = bpf_get_smp_processor_id();
	struct qw_running *r = bpf_map_lookup_elem(&running, &cpu);
	if (!r)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 idle_from = 0;
	if (r->start_ns && r->tgid == 0) {
		// The idle task leaves: its slice waits in the slot for the next record.
		idle_from = r->start_ns;
	} else if (r->start_ns) {
		// `current` is still the task leaving: the helpers name it.
		struct qw_slice *s = bpf_ringbuf_reserve(&slices, sizeof(*s), 0);
		if (s) {
			s->start_ns = r->start_ns;
			s->end_ns = now;
			s->cgid = bpf_get_current_cgroup_id();
			s->idle_from_ns = r->idle_from_ns;
			s->tgid = bpf_get_current_pid_tgid() >> 32;
			s->cpu = cpu;
			bpf_get_current_comm(s->comm, sizeof(s->comm));
			// Submitted before the slot changes: a reader that saw the new slot
			// finds this record in the ring.
			bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
		} else {
			__u32 zero = 0;
			__u64 *d = bpf_map_lookup_elem(&dropped, &zero);
			if (d)
				__sync_fetch_and_add(d, 1);
		}
	}
	__sync_fetch_and_add(&r->seq, 1);
	r->start_ns = now;
	r->idle_from_ns = idle_from;
	// Direct loads from the BTF-typed pointer (the verifier turns them into
	// fault-safe loads): no helper call, unlike bpf_probe_read_kernel.
	r->tgid = next->tgid;
	r->cgid = next->cgroups->dfl_cgrp->kn->id;
	__sync_fetch_and_add(&r->seq, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
