//! RAPL domains, where they sit, and which contain which, so that a total never
//! counts a joule twice.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// A RAPL power domain. The names (`package`, `core`, `uncore`, `dram`, `psys`) are
/// the ones every output of quietwatt uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Domain {
    /// The whole processor package (or die): cores, caches, uncore.
    Package,
    /// PP0: all the cores of the package. Inside `package`.
    Core,
    /// PP1: the uncore, usually the integrated GPU. Inside `package`.
    Uncore,
    /// The memory attached to the package. Not inside `package`.
    Dram,
    /// The whole platform (SoC, memory, more), one per system. Covers everything else.
    Psys,
}

impl Domain {
    /// Every domain, in the order quietwatt prints them.
    pub const ALL: [Domain; 5] = [
        Domain::Package,
        Domain::Core,
        Domain::Uncore,
        Domain::Dram,
        Domain::Psys,
    ];

    /// The name used in every output.
    pub fn name(self) -> &'static str {
        match self {
            Domain::Package => "package",
            Domain::Core => "core",
            Domain::Uncore => "uncore",
            Domain::Dram => "dram",
            Domain::Psys => "psys",
        }
    }

    /// The domain that contains this one, if any: core and uncore are inside package.
    pub fn parent(self) -> Option<Domain> {
        match self {
            Domain::Core | Domain::Uncore => Some(Domain::Package),
            _ => None,
        }
    }

    /// A power no real part of this domain exceeds, per socket: used to warn when the
    /// sampling period is long enough for a counter to wrap twice unseen, and to
    /// estimate wrap periods. Deliberately generous (a 2-socket 400 W server part).
    pub fn max_plausible_power(self) -> crate::Watts {
        crate::Watts(match self {
            Domain::Package => 500.0,
            Domain::Core => 450.0,
            Domain::Uncore => 150.0,
            Domain::Dram => 150.0,
            Domain::Psys => 1000.0,
        })
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not one of the five domains.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown domain '{0}': expected one of package, core, uncore, dram, psys")]
pub struct UnknownDomainName(pub String);

impl FromStr for Domain {
    type Err = UnknownDomainName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "package" | "pkg" => Domain::Package,
            "core" | "cores" | "pp0" => Domain::Core,
            "uncore" | "pp1" | "gpu" => Domain::Uncore,
            "dram" | "ram" => Domain::Dram,
            "psys" | "platform" => Domain::Psys,
            _ => return Err(UnknownDomainName(s.to_string())),
        })
    }
}

/// A processor package (socket), as numbered by `physical_package_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Socket(pub u32);

impl fmt::Display for Socket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One measurable counter: a domain on a socket (and die, on multi-die Intel parts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DomainId {
    /// The package the counter belongs to (psys: the package whose zone reports it).
    pub socket: Socket,
    /// The die inside the package, where the kernel splits packages by die.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// What the counter covers.
    pub domain: Domain,
}

impl DomainId {
    /// A domain on a socket, without a die split.
    pub fn new(socket: u32, domain: Domain) -> Self {
        DomainId {
            socket: Socket(socket),
            die: None,
            domain,
        }
    }
}

impl fmt::Display for DomainId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.die {
            Some(d) => write!(f, "{}/die{}/{}", self.socket, d, self.domain),
            None => write!(f, "{}/{}", self.socket, self.domain),
        }
    }
}

/// Indices of the counters whose sum is the total energy without double counting,
/// assuming every counter moves (see [`total_members_live`]).
pub fn total_members(ids: &[DomainId]) -> Vec<usize> {
    total_members_live(ids, &vec![true; ids.len()])
}

/// Indices of the counters whose sum is the total energy without double counting.
///
/// - A psys that moves covers the platform: it alone is the total, and only one psys
///   is ever counted (a platform has one; on Sapphire/Emerald Rapids only the master
///   package reads it and the others read 0).
/// - A psys that does not move (`live[i] == false`: disabled by the firmware, or read
///   on a package that is not the master) is left out, and the total falls back to
///   the rest.
/// - Otherwise every selected domain is added unless its parent is selected on the
///   same socket and die: core and uncore are inside package, so with package they
///   are left out; alone (`-d core`, `-d core,uncore`) they are the total.
///
/// Empty when nothing can be totalled (a psys that does not move, alone).
pub fn total_members_live(ids: &[DomainId], live: &[bool]) -> Vec<usize> {
    let live_at = |i: usize| live.get(i).copied().unwrap_or(true);
    if let Some(p) = (0..ids.len()).find(|&i| ids[i].domain == Domain::Psys && live_at(i)) {
        return vec![p];
    }
    (0..ids.len())
        .filter(|&i| {
            let id = ids[i];
            id.domain != Domain::Psys
                && !id.domain.parent().is_some_and(|parent| {
                    ids.iter()
                        .any(|o| o.domain == parent && o.socket == id.socket && o.die == id.die)
                })
        })
        .collect()
}

/// A human description of what the `members` of a total add up, e.g. `package + dram`,
/// `core + uncore`, `psys (covers the platform)`, or `none` when there are none.
pub fn total_rule_of(ids: &[DomainId], members: &[usize]) -> String {
    let mut domains: Vec<Domain> = members.iter().map(|&i| ids[i].domain).collect();
    domains.sort();
    domains.dedup();
    match domains.as_slice() {
        [] => "none".to_string(),
        [Domain::Psys] => "psys (covers the platform)".to_string(),
        ds => ds.iter().map(|d| d.name()).collect::<Vec<_>>().join(" + "),
    }
}

/// [`total_rule_of`] for [`total_members`].
pub fn total_rule(ids: &[DomainId]) -> String {
    total_rule_of(ids, &total_members(ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_uses_psys_alone_when_present() {
        let ids = [
            DomainId::new(0, Domain::Package),
            DomainId::new(0, Domain::Core),
            DomainId::new(0, Domain::Dram),
            DomainId::new(0, Domain::Psys),
        ];
        assert_eq!(total_members(&ids), vec![3]);
    }

    #[test]
    fn total_adds_packages_and_dram_never_core_or_uncore() {
        let ids = [
            DomainId::new(0, Domain::Package),
            DomainId::new(0, Domain::Core),
            DomainId::new(0, Domain::Uncore),
            DomainId::new(0, Domain::Dram),
            DomainId::new(1, Domain::Package),
            DomainId::new(1, Domain::Core),
            DomainId::new(1, Domain::Dram),
        ];
        assert_eq!(total_members(&ids), vec![0, 3, 4, 6]);
    }

    #[test]
    fn a_selection_without_package_totals_what_was_selected() {
        let core = [DomainId::new(0, Domain::Core)];
        assert_eq!(total_members(&core), vec![0]);
        assert_eq!(total_rule(&core), "core");
        let dram = [
            DomainId::new(0, Domain::Dram),
            DomainId::new(1, Domain::Dram),
        ];
        assert_eq!(total_members(&dram), vec![0, 1]);
        assert_eq!(total_rule(&dram), "dram");
        let cu = [
            DomainId::new(0, Domain::Core),
            DomainId::new(0, Domain::Uncore),
        ];
        assert_eq!(total_members(&cu), vec![0, 1]);
        assert_eq!(total_rule(&cu), "core + uncore");
        // Package contains core on the same socket only.
        let mixed = [
            DomainId::new(0, Domain::Package),
            DomainId::new(0, Domain::Core),
            DomainId::new(1, Domain::Core),
        ];
        assert_eq!(total_members(&mixed), vec![0, 2]);
        assert_eq!(total_rule(&mixed), "package + core");
    }

    #[test]
    fn a_psys_that_does_not_move_is_left_out_and_only_one_psys_counts() {
        let ids = [
            DomainId::new(0, Domain::Package),
            DomainId::new(0, Domain::Dram),
            DomainId::new(0, Domain::Psys),
            DomainId::new(1, Domain::Psys),
        ];
        // The master is package 1: socket 0's psys reads 0.
        assert_eq!(
            total_members_live(&ids, &[true, true, false, true]),
            vec![3]
        );
        // Disabled everywhere: packages + dram.
        let none = total_members_live(&ids, &[true, true, false, false]);
        assert_eq!(none, vec![0, 1]);
        assert_eq!(total_rule_of(&ids, &none), "package + dram");
        // Both move (never on real hardware): still one.
        assert_eq!(total_members_live(&ids, &[true; 4]).len(), 1);
        // psys alone and dead: no total at all, never a 0 labelled package.
        let only = [DomainId::new(0, Domain::Psys)];
        let m = total_members_live(&only, &[false]);
        assert!(m.is_empty());
        assert_eq!(total_rule_of(&only, &m), "none");
    }

    #[test]
    fn domain_names_round_trip() {
        for d in Domain::ALL {
            assert_eq!(d.name().parse::<Domain>().unwrap(), d);
        }
        assert!("gpu0".parse::<Domain>().is_err());
    }
}
