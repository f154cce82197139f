//! Who a cgroup is in Kubernetes, read on the node alone: the pod's UID and the
//! container's id in full from the cgroup's path (the kubelet's systemd and
//! cgroupfs drivers, with containerd, CRI-O or Docker), and the pod's namespace
//! and name from the kubelet's log directory (`/var/log/pods/<namespace>_<name>_<uid>`,
//! which every CRI runtime writes). No API server is asked: an exporter on
//! every node needs no credentials and no network to label its series.
//!
//! [`crate::names::readable`] keeps a short name for tables
//! (`containerd:4f1c2d3e4b5a`); a fleet's series need the identity in full, to
//! be joined with kube-state-metrics' `kube_pod_info{uid}` and
//! `kube_pod_container_info{container_id}`, whose `container_id` has the same
//! `<runtime>://<id>` form.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the kubelet keeps its pods' logs, by default.
pub const POD_LOGS: &str = "/var/log/pods";

/// A cgroup's Kubernetes identity.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodIdentity {
    /// The pod's UID (`8a1c…-…`, dashes as the API writes it).
    pub pod_uid: String,
    /// The container's id as the pod's status writes it
    /// (`containerd://<64 hex>`, `cri-o://…`, `docker://…`), when the cgroup is
    /// a container's rather than the pod's; the bare id under the cgroupfs
    /// driver, whose path does not name the runtime.
    pub container_id: Option<String>,
    /// The pod's namespace, when its log directory was found.
    pub namespace: Option<String>,
    /// The pod's name, when its log directory was found.
    pub pod: Option<String>,
}

impl PodIdentity {
    /// The labels to export, in order, leaving out what is not known.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut l = vec![("pod_uid", self.pod_uid.clone())];
        let known = [
            ("container_id", &self.container_id),
            ("namespace", &self.namespace),
            ("pod", &self.pod),
        ];
        l.extend(known.into_iter().filter_map(|(k, v)| Some((k, v.clone()?))));
        l
    }
}

/// The pod UID and container id a cgroup path (relative to the hierarchy) holds,
/// if it is a pod's or a pod's container's:
/// - systemd driver: `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope`
///   (`crio-<id>.scope`, `docker-<id>.scope`);
/// - cgroupfs driver: `/kubepods/burstable/pod<uid>/<id>`.
pub fn from_cgroup_path(rel: &str) -> Option<(String, Option<String>)> {
    let mut parts = rel.split('/').filter(|c| !c.is_empty());
    let uid = parts.by_ref().find_map(pod_uid)?;
    let container = parts.next().and_then(container_id);
    Some((uid, container))
}

/// A pod's UID from its cgroup's directory name (`kubepods-…-pod<uid>.slice`
/// with underscores, or `pod<uid>`).
fn pod_uid(component: &str) -> Option<String> {
    let name = component.strip_suffix(".slice").unwrap_or(component);
    let (_, uid) = name.rsplit_once("pod")?;
    let uid = uid.replace('_', "-");
    let dashed = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    dashed.then_some(uid)
}

/// A container's id, with its runtime, from its cgroup's directory name.
fn container_id(component: &str) -> Option<String> {
    let unit = component.strip_suffix(".scope").unwrap_or(component);
    for (prefix, runtime) in [
        ("cri-containerd-", "containerd"),
        ("crio-", "cri-o"),
        ("docker-", "docker"),
    ] {
        if let Some(id) = unit.strip_prefix(prefix) {
            return is_full_id(id).then(|| format!("{runtime}://{id}"));
        }
    }
    is_full_id(unit).then(|| unit.to_string())
}

fn is_full_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod log directory's name, `<namespace>_<name>_<uid>`, as
/// `(namespace, name, uid)`: namespaces and pod names are DNS labels and
/// subdomains, which never hold `_`.
pub fn parse_log_dir(name: &str) -> Option<(&str, &str, &str)> {
    let mut it = name.splitn(3, '_');
    let (ns, pod, uid) = (it.next()?, it.next()?, it.next()?);
    (!ns.is_empty() && !pod.is_empty() && pod_uid(&format!("pod{uid}")).as_deref() == Some(uid))
        .then_some((ns, pod, uid))
}

/// The node's pods by UID, from the kubelet's log directory, read again at most
/// every 10 s when asked for a UID it does not know (a pod started since).
#[derive(Debug)]
pub struct PodDirectory {
    dir: PathBuf,
    pods: HashMap<String, (String, String)>,
    read_at: Option<Instant>,
}

impl PodDirectory {
    /// The pods whose log directories are in `dir` ([`POD_LOGS`] on a node).
    pub fn new(dir: impl Into<PathBuf>) -> PodDirectory {
        PodDirectory {
            dir: dir.into(),
            pods: HashMap::new(),
            read_at: None,
        }
    }

    /// The directory it reads.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `(namespace, name)` of the pod with `uid`, if its directory is there.
    pub fn lookup(&mut self, uid: &str) -> Option<(&str, &str)> {
        let due = self
            .read_at
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10));
        if !self.pods.contains_key(uid) && due {
            self.read();
        }
        self.pods.get(uid).map(|(n, p)| (n.as_str(), p.as_str()))
    }

    fn read(&mut self) {
        self.read_at = Some(Instant::now());
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        self.pods.clear();
        for e in entries.flatten() {
            let name = e.file_name();
            if let Some((ns, pod, uid)) = name.to_str().and_then(parse_log_dir) {
                self.pods
                    .insert(uid.to_string(), (ns.to_string(), pod.to_string()));
            }
        }
    }

    /// The identity of the cgroup at `rel` (relative to the hierarchy), if it is
    /// a pod's or a container's, with the pod's namespace and name when found.
    pub fn identify(&mut self, rel: &str) -> Option<PodIdentity> {
        let (pod_uid, container_id) = from_cgroup_path(rel)?;
        let (namespace, pod) = match self.lookup(&pod_uid) {
            Some((n, p)) => (Some(n.to_string()), Some(p.to_string())),
            None => (None, None),
        };
        Some(PodIdentity {
            pod_uid,
            container_id,
            namespace,
            pod,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "12345678-90ab-cdef-1234-567890abcdef";
    const ID: &str = "4f1c2d3e4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";

    #[test]
    fn systemd_and_cgroupfs_paths_give_the_pod_uid_and_the_container_id_in_full() {
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            UID.replace('-', "_")
        );
        assert_eq!(from_cgroup_path(&systemd), Some((UID.to_string(), None)));
        for (scope, runtime) in [
            ("cri-containerd-", "containerd"),
            ("crio-", "cri-o"),
            ("docker-", "docker"),
        ] {
            assert_eq!(
                from_cgroup_path(&format!("{systemd}/{scope}{ID}.scope")),
                Some((UID.to_string(), Some(format!("{runtime}://{ID}"))))
            );
        }
        let guaranteed = format!(
            "/kubepods.slice/kubepods-pod{}.slice",
            UID.replace('-', "_")
        );
        assert_eq!(from_cgroup_path(&guaranteed).unwrap().0, UID);
        assert_eq!(
            from_cgroup_path(&format!("/kubepods/besteffort/pod{UID}/{ID}")),
            Some((UID.to_string(), Some(ID.to_string())))
        );
        // Not a pod: a service, a docker container outside Kubernetes, a short uid.
        assert_eq!(from_cgroup_path("/system.slice/ssh.service"), None);
        assert_eq!(
            from_cgroup_path(&format!("/system.slice/docker-{ID}.scope")),
            None
        );
        assert_eq!(
            from_cgroup_path("/kubepods.slice/kubepods-pod1234.slice"),
            None
        );
        // A pod's other children (a sandbox with a short name) are the pod's.
        assert_eq!(
            from_cgroup_path(&format!("{systemd}/crio-conmon-1.scope")),
            Some((UID.to_string(), None))
        );
    }

    #[test]
    fn the_log_directory_names_each_pod_and_a_new_pod_is_found_later() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(
            dir.path()
                .join(format!("kube-system_coredns-5d78c9869d-x7k2p_{UID}")),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("not-a-pod")).unwrap();
        let mut pods = PodDirectory::new(dir.path());
        assert_eq!(
            pods.lookup(UID),
            Some(("kube-system", "coredns-5d78c9869d-x7k2p"))
        );
        let rel = format!("/kubepods/pod{UID}/{ID}");
        let id = pods.identify(&rel).unwrap();
        assert_eq!(
            id.labels(),
            [
                ("pod_uid", UID.to_string()),
                ("container_id", ID.to_string()),
                ("namespace", "kube-system".to_string()),
                ("pod", "coredns-5d78c9869d-x7k2p".to_string()),
            ]
        );
        // Unknown pods keep their UID and container; a missing directory is no error.
        let mut none = PodDirectory::new(dir.path().join("absent"));
        assert_eq!(none.identify(&rel).unwrap().labels().len(), 2);
        assert_eq!(parse_log_dir("ns_name_not-a-uid"), None);
        assert_eq!(parse_log_dir(&format!("_name_{UID}")), None);
    }
}
