//! FUSE glue: serves the [`Tree`](crate::layout::Tree) from memory.
//!
//! - Every file is opened with `FOPEN_DIRECT_IO`: each `read`/`pread` reaches this
//!   code, nothing is page-cached, and a generated file's value is computed when
//!   read. As with sysfs' seq_file, a read at offset 0 generates the text afresh
//!   and reads further into the same open file continue that snapshot, so a value
//!   read in pieces is never torn.
//! - Entries and attributes under powercap (which faults can remove) and
//!   `truth.json` have a TTL of 0; the rest 1 s.
//! - The mount has no `default_permissions`: permissions are checked here, as the
//!   kernel would for root-owned files of the node's mode (root bypasses them, as
//!   with CAP_DAC_OVERRIDE; a caller holding CAP_DAC_READ_SEARCH reads every file,
//!   as the least-privilege units in `contrib/systemd/` rely on; an `eacces`
//!   fault refuses even root).
//! - Writes change only the emulated CPU frequencies' limits (`scaling_min_freq`,
//!   `scaling_max_freq`: [`crate::cpufreq`]); every other write is EPERM, as power
//!   limits and MSR writes are not emulated. A truncating open of a limit (a
//!   shell's `>`) arrives as a size-0 `setattr`, a no-op as on sysfs.

use crate::cpufreq::{Attr, Limit, WriteError};
use crate::layout::{Content, Ino, Kind, Node};
use crate::msr::{self, Register, GARBAGE};
use crate::shared::{CounterRead, Shared};
use crate::truth::Mechanism;
use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenAccMode, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// capability(7)'s bits.
const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;

/// The effective capabilities of the thread that made a request (`CapEff` of
/// `/proc/PID/status`), as the kernel's own check would see them: FUSE passes
/// only the caller's ids. None when it cannot be read (it exited).
fn effective_caps(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// How long the kernel may cache what cannot change.
const STATIC_TTL: Duration = Duration::from_secs(1);

/// The filesystem the FUSE session runs.
pub(crate) struct EmulatorFs {
    shared: Arc<Shared>,
    /// The text last generated per open file (seq_file-like snapshots).
    snapshots: Mutex<HashMap<u64, Vec<u8>>>,
    next_fh: AtomicU64,
}

/// What a caller wants to do, for permission checks.
#[derive(Debug, Clone, Copy)]
struct Want {
    read: bool,
    write: bool,
    exec: bool,
}

impl EmulatorFs {
    pub fn new(shared: Arc<Shared>) -> EmulatorFs {
        EmulatorFs {
            shared,
            snapshots: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    fn node(&self, ino: INodeNo) -> Option<&Node> {
        self.shared.tree.get(ino.0)
    }

    /// The node if it exists and no fault hides it.
    fn visible(&self, ino: INodeNo) -> Result<&Node, Errno> {
        let node = self.node(ino).ok_or(Errno::ENOENT)?;
        if self.shared.visible(node, self.shared.now_ns()) {
            Ok(node)
        } else {
            Err(Errno::ENOENT)
        }
    }

    fn ttl(node: &Node) -> Duration {
        if node.dynamic {
            Duration::ZERO
        } else {
            STATIC_TTL
        }
    }

    fn attr(&self, ino: Ino, node: &Node) -> FileAttr {
        let (kind, nlink) = match node.kind {
            Kind::Dir(_) => (FileType::Directory, 2),
            Kind::File(_) => (FileType::RegularFile, 1),
            Kind::Symlink(_) => (FileType::Symlink, 1),
        };
        let t = self.shared.mounted_at;
        FileAttr {
            ino: INodeNo(ino),
            size: node.size,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind,
            perm: node.mode,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The kernel's permission check for a root:root node of `node.mode`.
    fn permitted(&self, req: &Request, node: &Node, want: Want) -> Result<(), Errno> {
        if want.read {
            if let Kind::File(Content::EnergyUj(i)) = node.kind {
                let c = self.shared.truth.counter(i);
                if self
                    .shared
                    .effect(c.socket, c.domain, self.shared.now_ns())
                    .eacces
                {
                    return Err(Errno::EACCES);
                }
            }
        }
        let mode = node.mode;
        let is_dir = matches!(node.kind, Kind::Dir(_));
        let caps = if req.uid() == 0 {
            u64::MAX
        } else {
            effective_caps(req.pid())
        };
        if caps & (1 << CAP_DAC_OVERRIDE) != 0 {
            // Anything but executing a file with no x bit.
            if want.exec && !is_dir && mode & 0o111 == 0 {
                return Err(Errno::EACCES);
            }
            return Ok(());
        }
        // Reading any file, searching any directory (the capability the
        // exporter's and the reader service's units grant instead of root).
        if caps & (1 << CAP_DAC_READ_SEARCH) != 0 && !want.write && (!want.exec || is_dir) {
            return Ok(());
        }
        let bits = if req.gid() == 0 {
            (mode >> 3) & 7
        } else {
            mode & 7
        };
        if (want.read && bits & 4 == 0)
            || (want.write && bits & 2 == 0)
            || (want.exec && bits & 1 == 0)
        {
            return Err(Errno::EACCES);
        }
        Ok(())
    }

    /// The text of a generated file, or the error its read gets.
    fn generate(&self, node: &Node, content: &Content) -> Result<Vec<u8>, Errno> {
        let now = self.shared.now_ns();
        if !self.shared.visible(node, now) {
            return Err(Errno::ENODEV);
        }
        let truth = &self.shared.truth;
        Ok(match *content {
            Content::Text(ref s) => s.as_bytes().to_vec(),
            Content::MaxRange(i) => format!("{}\n", truth.max_energy_range_uj(i)).into_bytes(),
            Content::EnergyUj(i) => match self.shared.read_counter(i, Mechanism::Powercap, now) {
                CounterRead::Value(raw) => format!("{}\n", truth.powercap_uj(i, raw)).into_bytes(),
                CounterRead::Garbage => b"nan\n".to_vec(),
                CounterRead::Overrange(raw) => format!(
                    "{}\n",
                    truth
                        .max_energy_range_uj(i)
                        .saturating_add(1)
                        .saturating_add(truth.powercap_uj(i, raw))
                )
                .into_bytes(),
                CounterRead::Vanished => return Err(Errno::ENODEV),
                CounterRead::Busy => return Err(Errno::EBUSY),
            },
            Content::Truth => {
                let mut json =
                    serde_json::to_vec_pretty(&self.shared.report()).map_err(|_| Errno::EIO)?;
                json.push(b'\n');
                json
            }
            Content::ProcStat => {
                // The first line is what load readers parse: user nice system idle
                // iowait irq softirq steal, in USER_HZ jiffies.
                let (busy, idle) = self.shared.config.load_jiffies(now);
                format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\nintr 0\nctxt 0\n").into_bytes()
            }
            Content::CpuFreq(cpu, attr) => {
                let khz = truth.cpufreq_value(cpu, attr).ok_or(Errno::EIO)?;
                format!("{khz}\n").into_bytes()
            }
            Content::Msr(_) => return Err(Errno::EIO),
        })
    }

    /// The CPU and limit a write may change: `scaling_min_freq`/`scaling_max_freq`.
    fn writable_limit(&self, ino: INodeNo) -> Result<(u32, Limit), Errno> {
        match self.visible(ino)?.kind {
            Kind::File(Content::CpuFreq(cpu, Attr::Limit(limit))) => Ok((cpu, limit)),
            // Power limits and MSR writes are not emulated (as with msr.allow_writes=off).
            _ => Err(Errno::EPERM),
        }
    }

    /// `pread(fd, buf, size, reg)` on `/dev/cpu/cpu/msr`.
    fn read_msr(&self, cpu: u32, reg: u64, size: u32) -> Result<Vec<u8>, Errno> {
        if size % 8 != 0 {
            return Err(Errno::EINVAL);
        }
        let s = &self.shared;
        let register =
            msr::register(&s.config, &s.truth, s.unit_register, cpu, reg).ok_or(Errno::EIO)?;
        let value = match register {
            Register::Fixed(v) => v,
            Register::Energy(i) => match s.read_counter(i, Mechanism::Msr, s.now_ns()) {
                CounterRead::Value(raw) => s.truth.wrap(raw),
                CounterRead::Garbage => GARBAGE,
                CounterRead::Overrange(raw) => s.truth.wrap(raw) | (1u64 << s.truth.bits()),
                CounterRead::Vanished => return Err(Errno::EIO),
                CounterRead::Busy => return Err(Errno::EBUSY),
            },
        };
        Ok(value.to_le_bytes().repeat(size as usize / 8))
    }

    fn read(&self, ino: INodeNo, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let node = self.node(ino).ok_or(Errno::ENOENT)?;
        let Kind::File(content) = &node.kind else {
            return Err(Errno::EISDIR);
        };
        let latency = self.shared.config.read_latency;
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        if let Content::Msr(cpu) = *content {
            if !self.shared.visible(node, self.shared.now_ns()) {
                return Err(Errno::ENODEV);
            }
            return self.read_msr(cpu, offset, size);
        }
        let snapshots = || {
            self.snapshots
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        let text = if offset == 0 {
            let text = self.generate(node, content)?;
            snapshots().insert(fh, text.clone());
            text
        } else {
            let kept = snapshots().get(&fh).cloned();
            match kept {
                Some(t) => t,
                None => {
                    let text = self.generate(node, content)?;
                    snapshots().insert(fh, text.clone());
                    text
                }
            }
        };
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(text.len());
        let end = start.saturating_add(size as usize).min(text.len());
        Ok(text[start..end].to_vec())
    }
}

impl Filesystem for EmulatorFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = (|| {
            self.visible(parent)?;
            let name = name.to_str().ok_or(Errno::ENOENT)?;
            let ino = self
                .shared
                .tree
                .lookup(parent.0, name)
                .ok_or(Errno::ENOENT)?;
            let node = self.visible(INodeNo(ino))?;
            Ok((ino, node))
        })();
        match found {
            Ok((ino, node)) => reply.entry(&Self::ttl(node), &self.attr(ino, node), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino) {
            Some(node) => reply.attr(&Self::ttl(node), &self.attr(ino.0, node)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.visible(ino).map(|n| &n.kind) {
            Ok(Kind::Symlink(target)) => reply.data(target.as_bytes()),
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let opened = (|| {
            let node = self.visible(ino)?;
            if matches!(node.kind, Kind::Dir(_)) {
                return Err(Errno::EISDIR);
            }
            let (read, write) = match flags.acc_mode() {
                OpenAccMode::O_RDONLY => (true, false),
                OpenAccMode::O_WRONLY => (false, true),
                OpenAccMode::O_RDWR => (true, true),
            };
            // sysfs refuses writes to attributes without a store method, even to root.
            if write && node.mode & 0o222 == 0 {
                return Err(Errno::EACCES);
            }
            self.permitted(
                req,
                node,
                Want {
                    read,
                    write,
                    exec: false,
                },
            )?;
            Ok(self.next_fh.fetch_add(1, Ordering::Relaxed))
        })();
        match opened {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.read(ino, fh.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The open checked the writer's permission; sysfs takes each write whole.
        let written = self.writable_limit(ino).and_then(|(cpu, limit)| {
            self.shared
                .truth
                .write_cpufreq(cpu, limit, data)
                .map_err(|e| match e {
                    WriteError::NotANumber | WriteError::Crossed => Errno::EINVAL,
                    WriteError::NoSuchCpu => Errno::ENODEV,
                })
        });
        match written {
            Ok(()) => reply.written(u32::try_from(data.len()).unwrap_or(u32::MAX)),
            Err(e) => reply.error(e),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.snapshots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&fh.0);
        reply.ok();
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let opened = self.visible(ino).and_then(|node| {
            if !matches!(node.kind, Kind::Dir(_)) {
                return Err(Errno::ENOTDIR);
            }
            self.permitted(
                req,
                node,
                Want {
                    read: true,
                    write: false,
                    exec: false,
                },
            )
        });
        match opened {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let node = match self.visible(ino) {
            Ok(n) => n,
            Err(e) => return reply.error(e),
        };
        let Kind::Dir(entries) = &node.kind else {
            return reply.error(Errno::ENOTDIR);
        };
        let now = self.shared.now_ns();
        let mut all: Vec<(Ino, FileType, &str)> = vec![
            (ino.0, FileType::Directory, "."),
            (node.parent, FileType::Directory, ".."),
        ];
        for (name, child) in entries {
            let Some(c) = self.shared.tree.get(*child) else {
                continue;
            };
            if !self.shared.visible(c, now) {
                continue;
            }
            let kind = match c.kind {
                Kind::Dir(_) => FileType::Directory,
                Kind::File(_) => FileType::RegularFile,
                Kind::Symlink(_) => FileType::Symlink,
            };
            all.push((*child, kind, name));
        }
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (child, kind, name)) in all.into_iter().enumerate().skip(skip) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let checked = self.visible(ino).and_then(|node| {
            self.permitted(
                req,
                node,
                Want {
                    read: mask.contains(AccessFlags::R_OK),
                    write: mask.contains(AccessFlags::W_OK),
                    exec: mask.contains(AccessFlags::X_OK),
                },
            )
        });
        match checked {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A truncating open (`echo 1500000 > scaling_max_freq`) of a writable limit
        // is a no-op, as on sysfs; any other change is refused.
        let truncated = (|| {
            if size != Some(0) || mode.is_some() || uid.is_some() || gid.is_some() {
                return Err(Errno::EPERM);
            }
            self.writable_limit(ino)?;
            let node = self.visible(ino)?;
            let want = Want {
                read: false,
                write: true,
                exec: false,
            };
            self.permitted(req, node, want)?;
            Ok((Self::ttl(node), self.attr(ino.0, node)))
        })();
        match truncated {
            Ok((ttl, attr)) => reply.attr(&ttl, &attr),
            Err(e) => reply.error(e),
        }
    }
}
