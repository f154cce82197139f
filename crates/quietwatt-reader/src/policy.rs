//! The access policy: which local users and groups may read which domains,
//! and how finely (the finest interval between two different readings, the
//! energy step every reading is rounded down to). Root (uid 0) is never
//! coarsened nor refused.
//!
//! The policy file is TOML (`docs/reader.md`):
//!
//! ```toml
//! version = 1
//! [[allow]]
//! groups = ["quietwatt-readers"]   # names or numeric ids
//! users = ["alice", 1001]
//! domains = ["package", "dram"]    # leave out for every domain
//! interval_ms = 100                # finest interval between two readings
//! resolution_uj = 1000             # every energy rounded down to 1 mJ
//! ```
//!
//! The first `[[allow]]` rule naming the client's user, one of its groups, or
//! `everyone = true` applies; a client no rule names is refused. Without a
//! file, the default policy ([`Policy::default_for`]) lets the members of
//! [`DEFAULT_GROUP`] read every domain at [`SAFE_INTERVAL`] and
//! [`SAFE_RESOLUTION_UJ`], against PLATYPUS (CVE-2020-8694/8695): see
//! `docs/reader.md` for the reasoning and what loosening it gives up.

use quietwatt_core::domain::Domain;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The group the default policy lets read.
pub const DEFAULT_GROUP: &str = "quietwatt-readers";

/// The default policy's finest interval, and the finest a rule may set without
/// a warning that it weakens the PLATYPUS mitigation.
pub const SAFE_INTERVAL: Duration = Duration::from_millis(100);

/// The default policy's resolution (1 mJ), and the finest a rule may set
/// without a warning.
pub const SAFE_RESOLUTION_UJ: u64 = 1_000;

/// The coarsest a rule may set: an interval of an hour, a resolution of a
/// kilojoule (beyond, the figures are no use to anyone).
const COARSEST_INTERVAL: Duration = Duration::from_secs(3600);
const COARSEST_RESOLUTION_UJ: u64 = 1_000_000_000;

/// Who a client is, as the kernel says (`SO_PEERCRED`) and its supplementary
/// groups (from `/proc/PID/status` at the time it connected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its user id.
    pub uid: u32,
    /// Its group id.
    pub gid: u32,
    /// Its process id (0 when the kernel gave none).
    pub pid: i32,
    /// Its supplementary groups (empty when they could not be read: only the
    /// primary group then counts, which can only refuse more).
    pub groups: Vec<u32>,
}

impl Peer {
    /// Whether the client is in group `g` (primary or supplementary).
    pub fn in_group(&self, g: u32) -> bool {
        self.gid == g || self.groups.contains(&g)
    }
}

/// What the policy grants one client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The finest interval between two different readings (zero for root: every
    /// refresh of the service).
    pub interval: Duration,
    /// Every energy is rounded down to a multiple of this many µJ.
    pub resolution_uj: u64,
    /// The domains it may read; `None`: every domain.
    pub domains: Option<Vec<Domain>>,
    /// Which rule granted it, for the service's log.
    pub rule: String,
}

impl Grant {
    /// What the client gets when it asks for `interval` and `resolution_uj`
    /// (either absent: the policy's): never finer than the grant, coarser when
    /// asked; and whether it asked for finer than the grant.
    pub fn for_request(
        &self,
        interval: Option<Duration>,
        resolution_uj: Option<u64>,
    ) -> (Duration, u64, bool) {
        let i = interval.unwrap_or(self.interval);
        let r = resolution_uj.unwrap_or(self.resolution_uj).max(1);
        let coarsened = i < self.interval || r < self.resolution_uj;
        (
            i.max(self.interval).min(COARSEST_INTERVAL),
            r.max(self.resolution_uj).min(COARSEST_RESOLUTION_UJ),
            coarsened,
        )
    }

    /// Whether the grant covers `domain`.
    pub fn allows(&self, domain: Domain) -> bool {
        self.domains.as_ref().is_none_or(|d| d.contains(&domain))
    }
}

/// Where a policy came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// No file was given: [`Policy::default_for`].
    Default,
    /// This file.
    File(PathBuf),
}

/// One `[[allow]]` rule, resolved to ids.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    users: Vec<u32>,
    groups: Vec<u32>,
    everyone: bool,
    domains: Option<Vec<Domain>>,
    interval: Duration,
    resolution_uj: u64,
    /// Its position in the file (1-based) or what it is, for messages.
    name: String,
}

impl Rule {
    fn matches(&self, p: &Peer) -> bool {
        self.everyone || self.users.contains(&p.uid) || self.groups.iter().any(|&g| p.in_group(g))
    }
}

/// The access policy of a reader service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<Rule>,
    origin: Origin,
    /// What an admin should know: rules looser than the PLATYPUS mitigation,
    /// the default group missing.
    warnings: Vec<String>,
}

/// Why a client is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denial(pub String);

/// A policy file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// It could not be read.
    #[error("--policy {path}: {source}; give a readable TOML file (docs/reader.md)")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// It is not a policy: what is wrong, where, and the fix.
    #[error("--policy {path}: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the fix.
        why: String,
    },
}

/// User and group names to ids, from `/etc/passwd` and `/etc/group` (names
/// served by NSS modules alone, LDAP or sssd, are not seen: give their
/// numeric ids).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    users: Vec<(String, u32)>,
    groups: Vec<(String, u32)>,
}

impl Names {
    /// The names of this machine's `/etc/passwd` and `/etc/group` (none from a
    /// file that cannot be read).
    pub fn system() -> Names {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Names::from_files(&read("/etc/passwd"), &read("/etc/group"))
    }

    /// The names in the texts of a passwd and a group file.
    pub fn from_files(passwd: &str, group: &str) -> Names {
        let entries = |text: &str| {
            text.lines()
                .filter_map(|l| {
                    let mut f = l.split(':');
                    let name = f.next()?.trim();
                    let id = f.nth(1)?.trim().parse().ok()?;
                    (!name.is_empty() && !name.starts_with('#')).then(|| (name.to_string(), id))
                })
                .collect()
        };
        Names {
            users: entries(passwd),
            groups: entries(group),
        }
    }

    /// The id of group `name`.
    pub fn group(&self, name: &str) -> Option<u32> {
        self.groups
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, id)| id)
    }

    /// The id of user `name`.
    pub fn user(&self, name: &str) -> Option<u32> {
        self.users
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, id)| id)
    }
}

/// A user or group as the file names it.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Id {
    Number(u32),
    Name(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRule {
    #[serde(default)]
    users: Vec<Id>,
    #[serde(default)]
    groups: Vec<Id>,
    #[serde(default)]
    everyone: bool,
    domains: Option<Vec<String>>,
    interval_ms: Option<u64>,
    resolution_uj: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: Option<u32>,
    #[serde(default)]
    allow: Vec<FileRule>,
}

impl Policy {
    /// The default policy: the members of [`DEFAULT_GROUP`] read every domain,
    /// at most every [`SAFE_INTERVAL`], rounded down to [`SAFE_RESOLUTION_UJ`];
    /// everyone else but root is refused. `names` resolves the group (a
    /// machine without it lets root alone read, and says so).
    pub fn default_for(names: &Names) -> Policy {
        let (groups, warnings) = match names.group(DEFAULT_GROUP) {
            Some(g) => (vec![g], Vec::new()),
            None => (
                Vec::new(),
                vec![format!(
                    "the default policy lets the group {DEFAULT_GROUP} read, and this machine has no such group: only root can read until it exists (`groupadd --system {DEFAULT_GROUP}`, or the sysusers.d entry in contrib/) or a --policy file says who may"
                )],
            ),
        };
        Policy {
            rules: vec![Rule {
                users: Vec::new(),
                groups,
                everyone: false,
                domains: None,
                interval: SAFE_INTERVAL,
                resolution_uj: SAFE_RESOLUTION_UJ,
                name: format!("the default policy (group {DEFAULT_GROUP})"),
            }],
            origin: Origin::Default,
            warnings,
        }
    }

    /// Reads and checks the policy file at `path`, resolving names with `names`.
    pub fn load(path: &Path, names: &Names) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        // Named in full in refusals: the admin who reads one knows which file.
        let full = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Policy::parse(&text, &full, names)
    }

    /// Checks the text of a policy file (`path` names it in messages).
    pub fn parse(text: &str, path: &Path, names: &Names) -> Result<Policy, PolicyError> {
        let invalid = |why: String| PolicyError::Invalid {
            path: path.to_path_buf(),
            why,
        };
        let file: File = toml::from_str(text).map_err(|e| {
            invalid(format!(
                "{}; see docs/reader.md for the format",
                e.to_string().trim_end()
            ))
        })?;
        if let Some(v) = file.version.filter(|&v| v != 1) {
            return Err(invalid(format!(
                "version = {v}: this quietwatt reads version 1 policies"
            )));
        }
        let mut rules = Vec::new();
        let mut warnings = Vec::new();
        for (i, r) in file.allow.into_iter().enumerate() {
            let name = format!("[[allow]] rule {} of {}", i + 1, path.display());
            let resolve = |ids: Vec<Id>, what: &str, lookup: &dyn Fn(&str) -> Option<u32>| {
                ids.into_iter()
                    .map(|id| match id {
                        Id::Number(n) => Ok(n),
                        Id::Name(s) => lookup(&s).ok_or_else(|| {
                            invalid(format!(
                                "{name}: no {what} named '{s}' in /etc/{}: fix the name, or give its numeric id",
                                if what == "user" { "passwd" } else { "group" }
                            ))
                        }),
                    })
                    .collect::<Result<Vec<u32>, PolicyError>>()
            };
            let users = resolve(r.users, "user", &|s| names.user(s))?;
            let groups = resolve(r.groups, "group", &|s| names.group(s))?;
            if users.is_empty() && groups.is_empty() && !r.everyone {
                return Err(invalid(format!(
                    "{name} names no one: give users = [...], groups = [...] or everyone = true"
                )));
            }
            let domains = r
                .domains
                .map(|ds| {
                    ds.iter()
                        .map(|d| {
                            d.parse::<Domain>().map_err(|_| {
                                invalid(format!(
                                    "{name}: unknown domain '{d}': give package, core, uncore, dram or psys"
                                ))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?;
            let interval_ms = r.interval_ms.unwrap_or(SAFE_INTERVAL.as_millis() as u64);
            let interval = Duration::from_millis(interval_ms);
            if interval.is_zero() || interval > COARSEST_INTERVAL {
                return Err(invalid(format!(
                    "{name}: interval_ms = {interval_ms}: give 1 to {} ms (the default {} ms resists PLATYPUS)",
                    COARSEST_INTERVAL.as_millis(),
                    SAFE_INTERVAL.as_millis()
                )));
            }
            let resolution_uj = r.resolution_uj.unwrap_or(SAFE_RESOLUTION_UJ);
            if resolution_uj == 0 || resolution_uj > COARSEST_RESOLUTION_UJ {
                return Err(invalid(format!(
                    "{name}: resolution_uj = {resolution_uj}: give 1 to {COARSEST_RESOLUTION_UJ} µJ (the default {SAFE_RESOLUTION_UJ} resists PLATYPUS)"
                )));
            }
            if interval < SAFE_INTERVAL || resolution_uj < SAFE_RESOLUTION_UJ {
                warnings.push(format!(
                    "{name} grants readings every {interval_ms} ms to {resolution_uj} µJ, finer than the {} ms and {SAFE_RESOLUTION_UJ} µJ that keep PLATYPUS-style power side channels (CVE-2020-8694) impractical: the users it names can watch other users' and the kernel's work more closely (docs/reader.md)",
                    SAFE_INTERVAL.as_millis()
                ));
            }
            rules.push(Rule {
                users,
                groups,
                everyone: r.everyone,
                domains,
                interval,
                resolution_uj,
                name,
            });
        }
        if rules.is_empty() {
            warnings.push(format!(
                "{} has no [[allow]] rule: only root can read",
                path.display()
            ));
        }
        Ok(Policy {
            rules,
            origin: Origin::File(path.to_path_buf()),
            warnings,
        })
    }

    /// What an admin should know about this policy (said when the service
    /// starts).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Where it came from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The finest interval any rule grants (root's aside), if any rule.
    pub fn finest_interval(&self) -> Option<Duration> {
        self.rules.iter().map(|r| r.interval).min()
    }

    /// What `peer` may read, or why nothing (the message says the fix).
    pub fn decide(&self, peer: &Peer) -> Result<Grant, Denial> {
        if peer.uid == 0 {
            return Ok(Grant {
                interval: Duration::ZERO,
                resolution_uj: 1,
                domains: None,
                rule: "root".into(),
            });
        }
        if let Some(r) = self.rules.iter().find(|r| r.matches(peer)) {
            return Ok(Grant {
                interval: r.interval,
                resolution_uj: r.resolution_uj,
                domains: r.domains.clone(),
                rule: r.name.clone(),
            });
        }
        let mut groups = vec![peer.gid];
        groups.extend(peer.groups.iter().copied().filter(|&g| g != peer.gid));
        let groups = groups
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let fix = match &self.origin {
            Origin::Default => format!(
                "the service runs with the default policy, which lets the group {DEFAULT_GROUP} read: ask the admin to add your user to it (`usermod -aG {DEFAULT_GROUP} USER`, then log in again) or to name you in a policy file (--policy), or run as root"
            ),
            Origin::File(p) => format!(
                "ask the admin to add your user or one of your groups to the policy file {} (docs/reader.md), or run as root",
                p.display()
            ),
        };
        Err(Denial(format!(
            "user {} (groups {groups}) may not read energy through this service: {fix}",
            peer.uid
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names::from_files(
            "root:x:0:0::/root:/bin/sh\nalice:x:1001:1001::/home/alice:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
            "root:x:0:\nquietwatt-readers:x:990:alice\nnogroup:x:65534:\n",
        )
    }

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            uid,
            gid,
            pid: 1,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn the_default_lets_the_readers_group_read_coarsely_and_refuses_others_with_the_fix() {
        let p = Policy::default_for(&names());
        assert!(p.warnings().is_empty());
        let g = p.decide(&peer(1001, 1001, &[990])).expect("a member");
        assert_eq!((g.interval, g.resolution_uj), (SAFE_INTERVAL, 1000));
        assert!(g.allows(Domain::Dram));
        let refused = p.decide(&peer(65534, 65534, &[])).unwrap_err().0;
        assert!(refused.contains("user 65534"), "{refused}");
        assert!(
            refused.contains("usermod -aG quietwatt-readers"),
            "{refused}"
        );
        assert!(refused.contains("run as root"), "{refused}");
        // Root is never refused nor coarsened.
        let root = p.decide(&peer(0, 0, &[])).unwrap();
        assert_eq!((root.interval, root.resolution_uj), (Duration::ZERO, 1));
    }

    #[test]
    fn without_the_group_only_root_reads_and_the_admin_is_told() {
        let p = Policy::default_for(&Names::default());
        assert!(p.warnings()[0].contains("groupadd"), "{:?}", p.warnings());
        assert!(p.decide(&peer(1001, 990, &[990])).is_err());
        assert!(p.decide(&peer(0, 0, &[])).is_ok());
    }

    #[test]
    fn a_file_names_users_and_groups_by_name_or_id_and_the_first_matching_rule_applies() {
        let text = r#"
version = 1
[[allow]]
users = ["alice"]
domains = ["package"]
interval_ms = 500
resolution_uj = 10000
[[allow]]
groups = [4242, "nogroup"]
[[allow]]
everyone = true
interval_ms = 1000
resolution_uj = 1000000
"#;
        let p = Policy::parse(text, Path::new("/etc/qw.toml"), &names()).unwrap();
        assert!(p.warnings().is_empty(), "{:?}", p.warnings());
        let alice = p.decide(&peer(1001, 1001, &[990])).unwrap();
        assert_eq!(
            (alice.interval, alice.resolution_uj),
            (Duration::from_millis(500), 10_000)
        );
        assert!(alice.allows(Domain::Package) && !alice.allows(Domain::Dram));
        let member = p.decide(&peer(5000, 5000, &[4242])).unwrap();
        assert_eq!(member.interval, SAFE_INTERVAL);
        assert!(member.rule.contains("rule 2"), "{}", member.rule);
        let other = p.decide(&peer(6000, 6000, &[])).unwrap();
        assert_eq!(other.resolution_uj, 1_000_000);
        assert_eq!(p.finest_interval(), Some(SAFE_INTERVAL));
    }

    #[test]
    fn a_request_finer_than_the_grant_is_coarsened_and_a_coarser_one_kept() {
        let g = Policy::default_for(&names())
            .decide(&peer(1001, 1001, &[990]))
            .unwrap();
        assert_eq!(
            g.for_request(Some(Duration::from_millis(1)), Some(1)),
            (SAFE_INTERVAL, 1000, true)
        );
        assert_eq!(
            g.for_request(Some(Duration::from_secs(1)), Some(5000)),
            (Duration::from_secs(1), 5000, false)
        );
        assert_eq!(g.for_request(None, None), (SAFE_INTERVAL, 1000, false));
    }

    #[test]
    fn bad_files_are_refused_with_what_is_wrong_and_loose_rules_warned_about() {
        let path = Path::new("p.toml");
        for (text, says) in [
            (
                "[[allow]]\nusers = [\"mallory\"]\n",
                "no user named 'mallory'",
            ),
            ("[[allow]]\ngroups = [\"nope\"]\n", "no group named 'nope'"),
            ("[[allow]]\ninterval_ms = 5\n", "names no one"),
            (
                "[[allow]]\neveryone = true\ninterval_ms = 0\n",
                "interval_ms = 0",
            ),
            (
                "[[allow]]\neveryone = true\nresolution_uj = 0\n",
                "resolution_uj = 0",
            ),
            (
                "[[allow]]\neveryone = true\ndomains = [\"fpga\"]\n",
                "unknown domain 'fpga'",
            ),
            (
                "[[allow]]\neveryone = true\nintervall_ms = 5\n",
                "unknown field",
            ),
            ("version = 2\n", "version = 2"),
            ("this is not toml", "docs/reader.md"),
        ] {
            let e = Policy::parse(text, path, &names()).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("p.toml"), "{text:?}: {e}");
        }
        let loose = Policy::parse(
            "[[allow]]\neveryone = true\ninterval_ms = 1\nresolution_uj = 1\n",
            path,
            &names(),
        )
        .unwrap();
        assert!(
            loose.warnings()[0].contains("PLATYPUS"),
            "{:?}",
            loose.warnings()
        );
        let empty = Policy::parse("version = 1\n", path, &names()).unwrap();
        assert!(empty.warnings()[0].contains("only root"));
        assert!(empty.decide(&peer(1001, 1001, &[990])).is_err());
    }
}
