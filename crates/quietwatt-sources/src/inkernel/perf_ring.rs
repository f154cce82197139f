//! `--mechanism perf-ring`: the lo2s technique (paper 004) without BPF. On each
//! sampling CPU a cpu-clock event samples every 1/freq s with `PERF_SAMPLE_TIME |
//! PERF_SAMPLE_READ` and `read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID`; the
//! energy events are members of its group, so each overflow makes the kernel read
//! the whole group and copy `(time, values)` into the leader's mmap ring. User space
//! drains on its timer; the ring's watermark (a full ring's worth of bytes written)
//! wakes it early only if the timer falls far behind.
//!
//! **Can a RAPL event join a software-led group?** Yes, by the kernel sources (see
//! `docs/in-kernel-sampling.md`): `perf_event_open` moves a pure software group into
//! the context of a hardware event that joins it (`move_group`), and the RAPL PMU's
//! `event_init` does not look at the group. Two constraints follow: every event of
//! a group must use the same clock (each member is opened with the leader's
//! `CLOCK_MONOTONIC`), and a group holds events of one hardware PMU only (`power`
//! and AMD's `power_core` get separate groups). A kernel that refuses anyway
//! (EINVAL on a member that opens fine alone) is detected here, at open time, and
//! reported as [`OpenError::GroupRefused`]; [`super::open`] then polls the same
//! events instead.
//!
//! **Lost samples.** A full ring makes the kernel count what it could not write and
//! report it in a `PERF_RECORD_LOST` before the next sample it could write: that
//! count becomes the next sample's missed samples. Throttling (`PERF_RECORD_THROTTLE`)
//! is counted too.

use super::{
    cpu_clock_attr, perf_enable, perf_id, perf_open, period_ns, rename, ring_bytes, KernelCounts,
    KernelSample, KernelSampler, Plan, SampledEvents, MAX_DOMAINS,
};
use crate::error::{Error, Result};
use crate::perf::{open_counting_event, open_error, permission_fix, EventSpec};
use crate::Mechanism;
use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_FORMAT_GROUP, PERF_FORMAT_ID, PERF_RECORD_LOST, PERF_RECORD_SAMPLE,
    PERF_RECORD_THROTTLE, PERF_SAMPLE_READ, PERF_SAMPLE_TIME,
};
use quietwatt_core::Hertz;
use quietwatt_sys::ring::{page_size, PerfRing, MAX_RECORD};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

/// Why opening the perf-ring sampler failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The kernel refused an event as a member of the cpu-clock group although it
    /// opens alone: the events can still be polled.
    GroupRefused(String),
    /// Anything else (no permission, no such event, ...).
    Other(Error),
}

impl From<Error> for OpenError {
    fn from(e: Error) -> Self {
        OpenError::Other(e)
    }
}

/// Bytes one sample of a group of `n` events takes in the ring: header, time, the
/// group's count, then (value, id) for the leader and each member.
fn sample_bytes(n: usize) -> usize {
    8 + 8 + 8 + 16 * (n + 1)
}

/// The perf-ring sampler: one sampling group and one ring per sampling CPU.
pub struct PerfRingSampler {
    // Unmap the rings before closing their events.
    rings: Vec<PerfRing>,
    events: SampledEvents,
    leaders: Vec<OwnedFd>,
    /// Each group's member ids, in event order (the leader's own value is skipped).
    ids: Vec<Vec<u64>>,
    // Drain state, allocated once: each ring's read position, the head seen at the
    // start of a drain, the time of its next sample, and its lost samples not yet
    // attached to a sample.
    pos: Vec<u64>,
    head: Vec<u64>,
    front: Vec<Option<u64>>,
    lost: Vec<u64>,
    counts: KernelCounts,
}

impl std::fmt::Debug for PerfRingSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfRingSampler")
            .field("rings", &self.rings.len())
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl PerfRingSampler {
    /// Opens one group per sampling CPU of `plan`: a cpu-clock leader at `freq`
    /// (disabled until [`KernelSampler::start`]) and the energy events as members,
    /// with a ring sized for draining at `drain`.
    pub(crate) fn open(
        plan: Plan,
        freq: Hertz,
        drain: Hertz,
    ) -> std::result::Result<Self, OpenError> {
        let page = page_size();
        let mut leaders = Vec::with_capacity(plan.groups.len());
        let mut members = Vec::with_capacity(plan.event_count());
        let mut ids = Vec::with_capacity(plan.groups.len());
        let mut rings = Vec::with_capacity(plan.groups.len());
        for g in &plan.groups {
            let n = g.events.len();
            // Twice the BPF ring's drain periods: see the watermark below.
            let bytes = 2 * ring_bytes(freq, drain, 1, sample_bytes(n), 8 * page);
            let mut attr = cpu_clock_attr(period_ns(freq));
            attr.sample_type = (PERF_SAMPLE_TIME | PERF_SAMPLE_READ) as u64;
            attr.read_format = (PERF_FORMAT_GROUP | PERF_FORMAT_ID) as u64;
            // perf's watermark counts bytes written since its last wake-up, not bytes
            // unread (perf_output_begin): it fires every `watermark` bytes whatever
            // user space drained. As large as the kernel allows (the whole ring), with
            // a ring of 8 drain periods, it wakes the drain thread early at most once
            // every 8 drains: a safety net behind the drain timer, not a second clock.
            attr.set_watermark(1);
            attr.__bindgen_anon_2.wakeup_watermark = u32::try_from(bytes).unwrap_or(u32::MAX);
            let leader = perf_open(&mut attr, g.cpu, None).map_err(|e| {
                OpenError::Other(perf_error(
                    format!("the cpu-clock sampling leader on CPU {}", g.cpu),
                    e,
                ))
            })?;
            let mut group_ids = Vec::with_capacity(n);
            for spec in &g.events {
                let mut attr = perf_event_attr {
                    type_: spec.pmu_type,
                    config: spec.config,
                    ..Default::default()
                };
                // A group has one clock (perf_event_open checks it): the leader's.
                attr.set_use_clockid(1);
                attr.clockid = libc::CLOCK_MONOTONIC;
                let fd = match perf_open(&mut attr, g.cpu, Some(leader.as_fd())) {
                    Ok(fd) => fd,
                    Err(e) => {
                        // Refused in the group: is the event itself fine?
                        let alone = (e.raw_os_error() == Some(libc::EINVAL)).then(|| {
                            open_counting_event(spec.pmu_type, spec.config, spec.cpu).map(drop)
                        });
                        return Err(member_error(spec, e, alone));
                    }
                };
                let id = perf_id(fd.as_fd()).map_err(|e| {
                    OpenError::Other(Error::KernelSampling {
                        cpu: Some(spec.cpu),
                        detail: format!("read the perf id of {}", spec.origin.display()),
                        source: e,
                    })
                })?;
                group_ids.push(id);
                members.push(fd);
            }
            let ring = PerfRing::new(leader.as_fd(), bytes / page).map_err(|e| {
                OpenError::Other(match e.raw_os_error() {
                    Some(libc::EPERM | libc::EACCES) => Error::Permission {
                        path: PathBuf::from(format!("mmap of the perf ring on CPU {}", g.cpu)),
                        fix: format!(
                            "the {} KiB ring exceeds kernel.perf_event_mlock_kb for this user: run as root, \
                             raise it (`sudo sysctl kernel.perf_event_mlock_kb=4096`) or sample less often / drain more often",
                            bytes / 1024
                        ),
                    },
                    _ => Error::KernelSampling {
 cpu: Some(g.cpu),
 detail: format!("map the {} KiB perf ring", bytes / 1024),
 source: e,
 },
                })
            })?;
            leaders.push(leader);
            ids.push(group_ids);
            rings.push(ring);
        }
        let n = plan.groups.len();
        Ok(PerfRingSampler {
            rings,
            events: SampledEvents::new(plan, freq, members),
            leaders,
            ids,
            pos: vec![0; n],
            head: vec![0; n],
            front: vec![None; n],
            lost: vec![0; n],
            counts: KernelCounts::default(),
        })
    }

    /// Enables or disables every sampling group (through its leader).
    fn groups(&self, on: bool) -> Result<()> {
        for (fd, g) in self.leaders.iter().zip(&self.events.plan().groups) {
            perf_enable(fd.as_fd(), on).map_err(|e| Error::KernelSampling {
                cpu: Some(g.cpu),
                detail: format!("{} the sampling group", if on { "start" } else { "stop" }),
                source: e,
            })?;
        }
        Ok(())
    }

    /// Moves ring `g` past records that are not samples (counting lost samples and
    /// throttling) and returns the time of its next sample, if any before the head.
    fn front(&mut self, g: usize, buf: &mut [u8; MAX_RECORD]) -> Option<u64> {
        if let Some(t) = self.front[g] {
            return Some(t);
        }
        while self.pos[g] < self.head[g] {
            let (kind, size, body) = self.rings[g].read(self.pos[g], buf);
            match kind {
                PERF_RECORD_SAMPLE if body >= 8 => {
                    let t = u64_at(buf, 0);
                    self.front[g] = Some(t);
                    return Some(t);
                }
                PERF_RECORD_LOST if body >= 16 => {
                    let lost = u64_at(buf, 8);
                    self.lost[g] += lost;
                    self.counts.dropped += lost;
                }
                PERF_RECORD_THROTTLE => self.counts.throttled += 1,
                _ => {}
            }
            self.pos[g] = self.pos[g].saturating_add(size).min(self.head[g]);
        }
        None
    }
}

fn u64_at(buf: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[off..off + 8]);
    u64::from_ne_bytes(b)
}

/// Why `spec` could not join its group: `err` from the group open, and `alone`,
/// the outcome of opening it by itself (tried after an EINVAL only). An event
/// refused in the group but fine alone is [`OpenError::GroupRefused`]: the kernel
/// will not group it, but the same event can be polled.
fn member_error(spec: &EventSpec, err: io::Error, alone: Option<io::Result<()>>) -> OpenError {
    match alone {
        Some(Ok(())) => OpenError::GroupRefused(format!(
            "the kernel refused {} as a member of a cpu-clock sampling group on CPU {} \
             (EINVAL from perf_event_open) although it opens alone",
            spec.origin.display(),
            spec.cpu
        )),
        Some(Err(alone)) => OpenError::Other(rename(open_error(spec, alone), Mechanism::PerfRing)),
        None => OpenError::Other(rename(open_error(spec, err), Mechanism::PerfRing)),
    }
}

/// A perf error while opening `what`, with the permission fix when it is one.
fn perf_error(what: String, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => Error::Permission {
            path: PathBuf::from(what),
            fix: permission_fix(),
        },
        _ => Error::KernelSampling {
            cpu: None,
            detail: format!("open {what}"),
            source: e,
        },
    }
}

impl KernelSampler for PerfRingSampler {
    fn mechanism(&self) -> Mechanism {
        Mechanism::PerfRing
    }

    fn events(&self) -> &SampledEvents {
        &self.events
    }

    fn start(&mut self) -> Result<()> {
        self.groups(true)
    }

    fn stop(&mut self) -> Result<()> {
        // Disabling the leader stops the group; the overflow handler runs with
        // interrupts off on the group's CPU, where DISABLE runs too.
        self.groups(false)
    }

    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.leaders.iter().map(|f| f.as_fd()).collect()
    }

    fn drain(&mut self, f: &mut dyn FnMut(&KernelSample<'_>)) -> Result<()> {
        let n = self.rings.len();
        for g in 0..n {
            self.head[g] = self.rings[g].head();
            self.pos[g] = self.rings[g].tail();
            self.front[g] = None;
        }
        let mut buf = [0u8; MAX_RECORD];
        let mut values = [0u64; MAX_DOMAINS];
        loop {
            // The ring whose next sample is the oldest: the groups' samples merge in
            // time order.
            let mut best: Option<(usize, u64)> = None;
            for g in 0..n {
                if let Some(t) = self.front(g, &mut buf) {
                    if best.is_none_or(|(_, bt)| t < bt) {
                        best = Some((g, t));
                    }
                }
            }
            let Some((g, t)) = best else { break };
            let (_, size, body) = self.rings[g].read(self.pos[g], &mut buf);
            self.pos[g] = self.pos[g].saturating_add(size).min(self.head[g]);
            self.front[g] = None;
            // body: time, nr, then (value, id) pairs, the leader's first.
            let ids = &self.ids[g];
            let nr = if body >= 16 {
                u64_at(&buf, 8) as usize
            } else {
                0
            };
            let mut failed: u32 = (1u32 << ids.len()) - 1;
            for k in 0..nr.min((body.saturating_sub(16)) / 16) {
                let value = u64_at(&buf, 16 + 16 * k);
                let id = u64_at(&buf, 24 + 16 * k);
                if let Some(i) = ids.iter().position(|&x| x == id) {
                    values[i] = value;
                    failed &= !(1 << i);
                }
            }
            self.counts.taken += 1;
            let lost = std::mem::take(&mut self.lost[g]);
            f(&KernelSample {
                group: g,
                t_ns: t,
                lost_before: lost,
                values: &values[..ids.len()],
                failed,
            });
        }
        for g in 0..n {
            self.rings[g].release(self.pos[g]);
        }
        Ok(())
    }

    fn pending_bytes(&self) -> u64 {
        self.rings.iter().map(PerfRing::pending).sum()
    }

    fn kernel_counts(&self) -> KernelCounts {
        KernelCounts {
            // Received plus lost: what the leaders' overflows produced.
            taken: self.counts.taken + self.counts.dropped,
            ..self.counts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt_core::domain::{Domain, DomainId};
    use quietwatt_core::units::EnergyUnit;
    use std::os::fd::FromRawFd;

    /// A file standing in for a perf event's ring: control page, then `pages` data
    /// pages, records written at ring positions from `start`.
    struct FakeRing {
        fd: OwnedFd,
        pages: usize,
        pos: u64,
    }

    impl FakeRing {
        fn new(pages: usize, start: u64) -> FakeRing {
            let page = page_size();
            // SAFETY: a new anonymous file; the name is a NUL-terminated literal.
            let raw = unsafe { libc::memfd_create(c"qw-perf-ring".as_ptr(), libc::MFD_CLOEXEC) };
            assert!(raw >= 0, "memfd_create: {}", io::Error::last_os_error());
            // SAFETY: the kernel just returned this descriptor.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            rustix::fs::ftruncate(&fd, (page * (1 + pages)) as u64).unwrap();
            let r = FakeRing {
                fd,
                pages,
                pos: start,
            };
            r.put(1040, &(page as u64).to_ne_bytes());
            r.put(1048, &((page * pages) as u64).to_ne_bytes());
            r.put(1032, &start.to_ne_bytes()); // data_tail
            r.put(1024, &start.to_ne_bytes()); // data_head
            r
        }

        fn put(&self, off: usize, bytes: &[u8]) {
            rustix::io::pwrite(&self.fd, bytes, off as u64).unwrap();
        }

        /// Appends a record (wrapping at the end of the data area) and moves the head.
        fn record(&mut self, kind: u32, body: &[u64]) {
            let page = page_size();
            let size = page * self.pages;
            let mut bytes = Vec::new();
            bytes.extend_from_slice(&kind.to_ne_bytes());
            bytes.extend_from_slice(&0u16.to_ne_bytes());
            bytes.extend_from_slice(&((8 + 8 * body.len()) as u16).to_ne_bytes());
            for v in body {
                bytes.extend_from_slice(&v.to_ne_bytes());
            }
            for (i, b) in bytes.iter().enumerate() {
                let off = ((self.pos as usize) + i) % size;
                self.put(page + off, &[*b]);
            }
            self.pos += bytes.len() as u64;
            self.put(1024, &self.pos.to_ne_bytes());
        }

        fn tail(&self) -> u64 {
            let mut b = [0u8; 8];
            rustix::io::pread(&self.fd, &mut b, 1032).unwrap();
            u64::from_ne_bytes(b)
        }
    }

    fn spec(socket: u32, domain: Domain, cpu: u32) -> EventSpec {
        EventSpec::new(
            DomainId::new(socket, domain),
            23,
            2,
            cpu,
            EnergyUnit::PowerOfTwo(32),
        )
    }

    #[test]
    fn samples_of_several_rings_merge_in_time_order_with_losses_attached() {
        let plan = Plan::new(
            Mechanism::PerfRing,
            vec![
                spec(0, Domain::Package, 0),
                spec(0, Domain::Dram, 0),
                spec(1, Domain::Package, 1),
            ],
        )
        .unwrap();
        assert_eq!(plan.groups.len(), 2);
        let mut a = FakeRing::new(4, 0);
        // Starts 40 bytes before the end of its one data page: the first sample wraps.
        let mut b = FakeRing::new(1, (page_size() - 40) as u64);
        let sample = PERF_RECORD_SAMPLE;
        a.record(sample, &[100, 3, 1_000, 10, 5, 11, 7, 12]);
        a.record(PERF_RECORD_LOST, &[10, 5]);
        // id 12 missing: its value did not come.
        a.record(sample, &[300, 2, 1_200, 10, 6, 11]);
        b.record(sample, &[200, 2, 999, 20, 40, 21]);
        b.record(PERF_RECORD_THROTTLE, &[210, 20, 20]);
        b.record(sample, &[250, 2, 999, 20, 41, 21]);

        let rings = vec![
            PerfRing::new(a.fd.as_fd(), a.pages).unwrap(),
            PerfRing::new(b.fd.as_fd(), b.pages).unwrap(),
        ];
        let mut s = PerfRingSampler {
            rings,
            events: SampledEvents::new(plan, Hertz::clamped(1000.0), Vec::new()),
            leaders: Vec::new(),
            ids: vec![vec![11, 12], vec![21]],
            pos: vec![0; 2],
            head: vec![0; 2],
            front: vec![None; 2],
            lost: vec![0; 2],
            counts: KernelCounts::default(),
        };
        let mut got = Vec::new();
        s.drain(&mut |k| got.push((k.group, k.t_ns, k.lost_before, k.values.to_vec(), k.failed)))
            .unwrap();
        assert_eq!(
            got,
            vec![
                (0, 100, 0, vec![5, 7], 0),
                (1, 200, 0, vec![40], 0),
                (1, 250, 0, vec![41], 0),
                (0, 300, 5, vec![6, 7], 0b10),
            ]
        );
        let c = s.kernel_counts();
        assert_eq!((c.taken, c.dropped, c.throttled), (9, 5, 1));
        // Everything read was given back to the kernel.
        assert_eq!((a.tail(), b.tail()), (a.pos, b.pos));
        // Nothing new: nothing handed over.
        let mut more = 0;
        s.drain(&mut |_| more += 1).unwrap();
        assert_eq!(more, 0);
    }

    #[test]
    fn an_event_refused_in_the_group_but_fine_alone_means_fall_back() {
        let s = spec(0, Domain::Package, 0);
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        match member_error(&s, einval(), Some(Ok(()))) {
            OpenError::GroupRefused(why) => {
                assert!(
                    why.contains("cpu-clock sampling group") && why.contains("EINVAL"),
                    "{why}"
                );
            }
            OpenError::Other(e) => panic!("{e}"),
        }
        // Refused alone too: the event itself is the problem, no fallback.
        assert!(matches!(
            member_error(&s, einval(), Some(Err(einval()))),
            OpenError::Other(Error::Io { .. })
        ));
        // No permission: the perf fix, no fallback.
        match member_error(&s, io::Error::from_raw_os_error(libc::EACCES), None) {
            OpenError::Other(Error::Permission { fix, .. }) => {
                assert!(fix.contains("CAP_PERFMON"), "{fix}");
            }
            other => panic!("{other:?}"),
        }
        // An unknown PMU is named as perf-ring's.
        assert!(matches!(
            member_error(&s, io::Error::from_raw_os_error(libc::ENOENT), None),
            OpenError::Other(Error::MechanismUnavailable {
                mechanism: "perf-ring",
                ..
            })
        ));
    }

    #[test]
    fn a_sample_takes_the_bytes_its_group_needs() {
        // header, time, nr, (value, id) for the leader and two members.
        assert_eq!(sample_bytes(2), 8 + 8 + 8 + 3 * 16);
    }
}
