//! Readable names: a process's command name, a cgroup's path and what it is
//! (a systemd unit or slice, a container), and cgroups quietwatt creates.
//!
//! On cgroup v2 a cgroup's id (what `bpf_get_current_cgroup_id` returns) is the
//! inode number of its directory, so an id is resolved by walking the hierarchy.

use crate::error::{AttributionError, Result};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup` on a unified
/// system, `/sys/fs/cgroup/unified` on a hybrid one), from `/proc/self/mountinfo`.
pub fn cgroup2_mount() -> Result<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| {
        AttributionError::Cgroup {
            path: PathBuf::from("/proc/self/mountinfo"),
            source,
        }
    })?;
    mount_from(&info).ok_or(AttributionError::NoCgroup2)
}

fn mount_from(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// The cgroup id of a directory of the v2 hierarchy.
pub fn cgroup_id(dir: &Path) -> std::io::Result<u64> {
    std::fs::metadata(dir).map(|m| m.ino())
}

/// What a cgroup path says it is, shortened for a human: a container id
/// (`docker-<id>.scope`, `/docker/<id>`, `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`, `libpod-<id>.scope`: `docker:<12 hex>` and so on), a
/// Kubernetes pod (`...pod<uid>.slice`: `pod:<uid>`), a systemd unit or slice (its
/// name), else the path relative to the hierarchy (`/` for the root).
pub fn readable(rel: &str) -> String {
    let last = rel.rsplit('/').find(|c| !c.is_empty()).unwrap_or("");
    if last.is_empty() {
        return "/".to_string();
    }
    let unit = last.strip_suffix(".scope").unwrap_or(last);
    for (prefix, kind) in [
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-", "crio"),
        ("libpod-", "podman"),
    ] {
        if let Some(id) = unit.strip_prefix(prefix) {
            if is_container_id(id) {
                return format!("{kind}:{}", &id[..12]);
            }
        }
    }
    let mut parts = rel.rsplit('/').filter(|c| !c.is_empty());
    if let (Some(id), Some("docker")) = (parts.next(), parts.next()) {
        if is_container_id(id) {
            return format!("docker:{}", &id[..12]);
        }
    }
    if let Some(pod) = last
        .strip_suffix(".slice")
        .and_then(|s| s.rsplit_once("-pod").or_else(|| s.rsplit_once("pod")))
        .map(|(_, uid)| uid)
        .filter(|uid| uid.len() >= 32)
    {
        return format!("pod:{}", pod.replace('_', "-"));
    }
    if [".service", ".scope", ".slice", ".socket", ".mount"]
        .iter()
        .any(|s| last.ends_with(s))
    {
        return last.to_string();
    }
    rel.to_string()
}

fn is_container_id(id: &str) -> bool {
    id.len() >= 12 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Names of processes and cgroups, cached: a process is named when first asked
/// (its `comm`), a cgroup by walking the hierarchy (at most once a second when an
/// id is not found, so an id of a cgroup already removed costs little).
#[derive(Debug)]
pub struct Names {
    root: Option<PathBuf>,
    cgroups: HashMap<u64, (String, String)>,
    processes: HashMap<u32, String>,
    last_walk: Option<Instant>,
}

impl Names {
    /// Names under the mounted cgroup v2 hierarchy (none found: cgroups are named
    /// by id).
    pub fn new() -> Names {
        Names::under(cgroup2_mount().ok())
    }

    /// Names with the cgroup v2 hierarchy at `root`.
    pub fn under(root: Option<PathBuf>) -> Names {
        Names {
            root,
            cgroups: HashMap::new(),
            processes: HashMap::new(),
            last_walk: None,
        }
    }

    /// A process's command name (`comm`), or `?` once it is gone.
    pub fn process(&mut self, tgid: u32) -> &str {
        self.process_or(tgid, None)
    }

    /// A process's command name (`comm`) while it lives, else `seen` (the name
    /// the accounting saw, [`crate::Timeline::comm`]), else `?`.
    pub fn process_or(&mut self, tgid: u32, seen: Option<&str>) -> &str {
        if self.processes.len() >= crate::timeline::MAX_NAMES && !self.processes.contains_key(&tgid)
        {
            // Bounded: process ids are reused; an old name is worth less than memory.
            self.processes.clear();
        }
        self.processes.entry(tgid).or_insert_with(|| {
            std::fs::read_to_string(format!("/proc/{tgid}/comm"))
                .map(|s| s.trim_end().to_string())
                .ok()
                .or_else(|| seen.map(str::to_string))
                .unwrap_or_else(|| "?".to_string())
        })
    }

    /// An entity's id and name as a table shows them: the pid and the process's
    /// name, or the cgroup id and its readable name (`?` when no directory has it).
    pub fn id_and_name(&mut self, e: crate::Entity) -> (String, String) {
        match e {
            crate::Entity::Process(p) => (p.to_string(), self.process(p).to_string()),
            crate::Entity::Cgroup(c) => (
                c.to_string(),
                self.cgroup(c)
                    .map_or_else(|| "?".into(), |(_, n)| n.to_string()),
            ),
        }
    }

    /// A cgroup's path relative to the hierarchy (`/` for the root), and its
    /// readable name ([`readable`]); `None` when no directory has this id.
    pub fn cgroup(&mut self, id: u64) -> Option<(&str, &str)> {
        if !self.cgroups.contains_key(&id) {
            let due = self
                .last_walk
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
            if due {
                self.walk();
            }
        }
        self.cgroups.get(&id).map(|(p, n)| (p.as_str(), n.as_str()))
    }

    fn walk(&mut self) {
        self.last_walk = Some(Instant::now());
        let Some(root) = self.root.clone() else {
            return;
        };
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(ino) = cgroup_id(&dir) else { continue };
            let rel = dir
                .strip_prefix(&root)
                .map(|r| format!("/{}", r.display()))
                .unwrap_or_else(|_| dir.display().to_string());
            let name = readable(&rel);
            self.cgroups.insert(ino, (rel, name));
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
}

impl Default for Names {
    fn default() -> Self {
        Names::new()
    }
}

/// A cgroup v2 directory quietwatt created, removed when dropped (after its
/// processes have ended; a cgroup with live processes stays, and says so in
/// [`OwnCgroup::remove`]).
#[derive(Debug)]
pub struct OwnCgroup {
    path: PathBuf,
    id: u64,
    removed: bool,
}

impl OwnCgroup {
    /// Creates `name` under the hierarchy's root (root needed).
    pub fn create(name: &str) -> Result<OwnCgroup> {
        let root = cgroup2_mount()?;
        OwnCgroup::create_in(&root, name)
    }

    /// Creates `name` under `parent`.
    pub fn create_in(parent: &Path, name: &str) -> Result<OwnCgroup> {
        let path = parent.join(name);
        let io = |source| AttributionError::Cgroup {
            path: path.clone(),
            source,
        };
        std::fs::create_dir(&path).map_err(io)?;
        let id = cgroup_id(&path).map_err(io)?;
        Ok(OwnCgroup {
            path,
            id,
            removed: false,
        })
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its id, as the accounting program reports it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Moves process `pid` (all its threads) into it.
    pub fn add(&self, pid: u32) -> Result<()> {
        std::fs::write(self.path.join("cgroup.procs"), pid.to_string()).map_err(|source| {
            AttributionError::Cgroup {
                path: self.path.clone(),
                source,
            }
        })
    }

    /// Makes `cmd`'s process join this cgroup between fork and exec, so that the
    /// command and everything it starts are in it from their first instruction.
    pub fn join_on_exec(&self, cmd: &mut std::process::Command) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;
        // Prepared before the fork: between fork and exec only open and write run.
        let procs = self.path.join("cgroup.procs");
        let Ok(path) = std::ffi::CString::new(procs.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: the hook calls only async-signal-safe functions (open, write,
        // close) on memory prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // "0": the writing process itself.
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let e = std::io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(e);
                }
                Ok(())
            });
        }
    }

    /// Removes the directory (it must have no live process left).
    pub fn remove(mut self) -> Result<()> {
        self.removed = true;
        std::fs::remove_dir(&self.path).map_err(|source| AttributionError::Cgroup {
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for OwnCgroup {
    fn drop(&mut self) {
        if !self.removed {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_v2_mount_on_unified_and_hybrid_systems() {
        let hybrid = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                      42 31 0:39 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(
            mount_from(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let v1 = "42 31 0:39 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        assert_eq!(mount_from(v1), None);
    }

    #[test]
    fn names_say_what_the_path_says() {
        let id = "4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b";
        assert_eq!(
            readable(&format!("/system.slice/docker-{id}.scope")),
            "docker:4f3c2a1b0e9d"
        );
        assert_eq!(readable(&format!("/docker/{id}")), "docker:4f3c2a1b0e9d");
        assert_eq!(
            readable(&format!(
                "/kubepods.slice/kubepods-pod1.slice/cri-containerd-{id}.scope"
            )),
            "containerd:4f3c2a1b0e9d"
        );
        assert_eq!(
            readable("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod12345678_1234_1234_1234_123456789012.slice"),
            "pod:12345678-1234-1234-1234-123456789012"
        );
        assert_eq!(readable("/system.slice/sshd.service"), "sshd.service");
        assert_eq!(
            readable("/user.slice/user-1000.slice/session-2.scope"),
            "session-2.scope"
        );
        assert_eq!(readable("/"), "/");
        assert_eq!(readable("/batch/job7"), "/batch/job7");
    }
}
