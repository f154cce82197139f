//! `--attribute` of `record` and `run`: the energy split among processes or
//! cgroups (quietwatt-attribution), its flags, and how it is reported. The flags
//! become the library's typed [`Options`] once; the library composes the split.

use crate::emulated::Environment;
use crate::exit::Failure;
use quietwatt::sink::Sink;
use quietwatt::transform::{NoRows, Transformed};
use quietwatt_attribution::{
    Attribution, AttributionError, By, Entity, IdlePower, Names, Options, OwnCgroup, Totals,
    Tracker,
};

/// What `--attribute` splits by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ByArg {
    /// Processes (a thread's time goes to its process).
    Process,
    /// cgroups v2 (containers, systemd units and slices).
    Cgroup,
}

impl From<ByArg> for By {
    fn from(b: ByArg) -> By {
        match b {
            ByArg::Process => By::Process,
            ByArg::Cgroup => By::Cgroup,
        }
    }
}

/// `record`'s attribution flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// Write, instead of the energy per domain, each sample's package energy split
    /// among the processes or cgroups that ran (one row per entity per sample:
    /// t_ns,interval_ns,package,kind,id,name,joules,dynamic_j,idle_j,cpu_ns). Needs
    /// root and a kernel with BTF (a BPF program on sched_switch).
    #[arg(long, value_enum, value_name = "process|cgroup")]
    pub attribute: Option<ByArg>,
    /// With --attribute: each package's idle power in watts, set apart before the
    /// split and shared by CPU time over the package's capacity, or `fit` to fit it
    /// (the intercept of the package's power against its busy CPUs) as the
    /// recording goes (default: none, every joule is split as dynamic).
    #[arg(long, value_name = "W|fit", requires = "attribute", value_parser = parse_idle)]
    pub idle_watts: Option<IdlePower>,
}

/// `run`'s attribution flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Also report the command's own share of the package energy (it and every
    /// process it starts, in a cgroup quietwatt creates for it, or its process tree
    /// where none can be made), beside the machine's total. Needs root and a kernel
    /// with BTF.
    #[arg(long)]
    pub attribute: bool,
    /// With --attribute: each package's idle power in watts, set apart before the
    /// split, or `fit` to fit it as the command runs (default: none, every joule is
    /// split as dynamic).
    #[arg(long = "idle-watts", value_name = "W|fit", requires = "attribute", value_parser = parse_idle)]
    pub idle_watts: Option<IdlePower>,
}

/// Parses `--idle-watts`: watts (0 to 10000), or `fit`.
pub fn parse_idle(s: &str) -> Result<IdlePower, String> {
    IdlePower::parse(s)
}

fn idle(w: Option<IdlePower>) -> IdlePower {
    w.unwrap_or(IdlePower::None)
}

/// The split on the accounting program, each CPU's package from the topology
/// under the measured root; `what` names the command or flag in errors.
pub fn attribution(
    env: &Environment,
    options: &Options,
    what: &str,
) -> Result<Attribution, Failure> {
    Attribution::open(options, &env.root).map_err(|e| failure(what, e))
}

/// Why the split could not be opened, and the fix.
pub fn failure(what: &str, e: AttributionError) -> Failure {
    match e {
        AttributionError::Topology(_) => Failure::usage(format!("{what}: {e}")),
        e => tracker_failure(what, e),
    }
}

/// Why the accounting program could not be loaded, and the fix.
fn tracker_failure(what: &str, e: AttributionError) -> Failure {
    let or_leave_out = if what.starts_with("--") {
        format!(", or leave out {what}")
    } else {
        String::new()
    };
    Failure::usage(format!(
        "{what}: {e}; run as root (or with CAP_BPF and CAP_PERFMON) on a kernel with \
         BTF{or_leave_out}"
    ))
}

impl RecordArgs {
    /// The library's typed options, with `--attribute`.
    pub fn options(&self) -> Option<Options> {
        self.attribute
            .map(|by| Options::new(by.into(), idle(self.idle_watts)))
    }
}

fn j(uj: u64) -> f64 {
    uj as f64 / 1e6
}

/// Prints the entities that used the most energy over a recording, on stderr.
pub fn print_top(t: &Totals, n: usize) {
    warn_dropped(t);
    note_fit(t);
    let mut names = Names::new();
    let (top, other) = t.top(n);
    eprintln!();
    eprintln!(
        " Attributed {:.3} J of {:.3} J measured (package; {:.3} J unattributed: idle CPUs and nothing seen):",
        j(t.accounted_uj() - t.unattributed.total_uj()),
        j(t.energy_uj),
        j(t.unattributed.total_uj())
    );
    eprintln!();
    eprintln!(
        "  {:>10}  {:<32} {:>12} {:>12} {:>12} {:>10}",
        "id", "name", "joules", "dynamic", "idle share", "cpu (s)"
    );
    let row = |id: &str, name: &str, v: &quietwatt_attribution::EntityTotal| {
        eprintln!(
            "  {id:>10}  {name:<32} {:>12.6} {:>12.6} {:>12.6} {:>10.3}",
            j(v.total_uj()),
            j(v.dynamic_uj),
            j(v.idle_uj),
            v.cpu_ns as f64 / 1e9
        );
    };
    for (e, v) in &top {
        let (id, name) = names.id_and_name(*e);
        row(&id, &name, v);
    }
    if t.entities.len() > top.len() {
        row(
            "",
            &format!("({} others)", t.entities.len() - top.len()),
            &other,
        );
    }
    eprintln!();
}

fn note_fit(t: &Totals) {
    for (socket, w, n) in &t.fitted_idle {
        eprintln!(
            "quietwatt: package {socket}: idle power fitted to {w:.3} W over {n} intervals \
             (intercept of power against busy CPUs)"
        );
    }
}

fn warn_dropped(t: &Totals) {
    if t.dropped_slices > 0 {
        eprintln!(
            "quietwatt: warning: --attribute: {} CPU slices were lost in the kernel (its ring \
             was full): their time and energy are in `unattributed`",
            t.dropped_slices
        );
    }
}

/// The split's totals for `--json`: the package energy, what was attributed and
/// not, and the `n` entities that used the most.
pub fn json_top(t: &Totals, n: usize) -> quietwatt_attribution::AttributionTotals {
    quietwatt_attribution::AttributionTotals::top(t, n, &mut Names::new())
}

/// `run --attribute`: what the command's share covers, and the split of the
/// measurement (a sink for its totals alone: no row is written).
pub struct Share {
    scope: Scope,
    sink: Transformed<Attribution, NoRows>,
    idle: IdlePower,
}

/// What counts as the command.
enum Scope {
    /// A cgroup quietwatt made for it: it and every process it starts.
    Cgroup(OwnCgroup),
    /// No cgroup could be made: its process tree, as the kernel forked it.
    Tree(quietwatt_attribution::Descendants),
}

impl Scope {
    fn describe(&self) -> &'static str {
        match self {
            Scope::Cgroup(_) => "its cgroup: it and every process it started",
            Scope::Tree(_) => "its process tree: it and every process it started",
        }
    }
}

/// Puts `cmd` in a cgroup of its own (or, where none can be made, follows its
/// process tree) and opens the split; `None` without `--attribute`. The
/// measurement writes to [`Share::sink`].
pub fn run_share(
    args: &RunArgs,
    env: &Environment,
    meter: &quietwatt::Meter,
    rate: &quietwatt::Rate,
    cmd: &mut std::process::Command,
) -> Result<Option<Share>, Failure> {
    if !args.attribute {
        return Ok(None);
    }
    let idle = idle(args.idle_watts);
    let what = "--attribute";
    let name = format!("quietwatt-run-{}", std::process::id());
    let (scope, attribution) = match OwnCgroup::create(&name) {
        Ok(cg) => {
            cg.join_on_exec(cmd);
            let a = attribution(env, &Options::new(By::Cgroup, idle), what)?;
            (Scope::Cgroup(cg), a)
        }
        Err(e) => {
            eprintln!(
                "quietwatt: note: --attribute: cannot create a cgroup for the command ({e}); \
                 its share is its process tree, followed as the kernel forks it"
            );
            // Rooted at quietwatt itself, before the command exists: nothing the
            // command forks early is missed; its subtree is taken at the end.
            let (tracker, tree) = Tracker::open_following(std::process::id())
                .map_err(|e| tracker_failure(what, e))?;
            let options = Options::new(By::Process, idle);
            let a = Attribution::on(&options, &env.root, Box::new(tracker))
                .map_err(|e| failure(what, e))?;
            (Scope::Tree(tree), a)
        }
    };
    let mut sink = Transformed::new(attribution, NoRows);
    let meta = quietwatt::Metadata::new(meter.mechanism().name(), rate, &env.root);
    sink.begin(&meta, meter.channels())
        .map_err(|e| Failure::usage(format!("{what}: {e}")))?;
    Ok(Some(Share { scope, sink, idle }))
}

impl Share {
    /// The sink the measurement writes to: the split, keeping its totals.
    pub fn sink(&mut self) -> &mut dyn Sink {
        &mut self.sink
    }

    /// The command's share: (its entities' totals added up, the machine's totals).
    fn figures(&self, pid: u32) -> (quietwatt_attribution::EntityTotal, &Totals) {
        let t = self.sink.transform().totals();
        let entities: Vec<Entity> = match &self.scope {
            Scope::Cgroup(cg) => vec![Entity::Cgroup(cg.id())],
            Scope::Tree(tree) => {
                if tree.full() {
                    eprintln!(
                        "quietwatt: warning: --attribute: the command started more than {} \
                         processes; those started after that are not in its share",
                        quietwatt_attribution::tree::FOLLOWED
                    );
                }
                tree.of(pid).into_iter().map(Entity::Process).collect()
            }
        };
        let sum = entities.iter().filter_map(|e| t.entities.get(e)).sum();
        (sum, t)
    }

    /// Prints the command's share on stderr.
    pub fn print(&self, pid: u32, what: &str) {
        let (c, t) = self.figures(pid);
        warn_dropped(t);
        note_fit(t);
        let pct = if t.energy_uj > 0 {
            100.0 * c.total_uj() as f64 / t.energy_uj as f64
        } else {
            0.0
        };
        eprintln!(
            " Share of '{what}' ({}): {:.6} J of {:.6} J package energy ({pct:.1} %)",
            self.scope.describe(),
            j(c.total_uj()),
            j(t.energy_uj)
        );
        eprintln!(
            "   dynamic {:.6} J, idle share {:.6} J, CPU time {:.3} s; idle power: {}",
            j(c.dynamic_uj),
            j(c.idle_uj),
            c.cpu_ns as f64 / 1e9,
            self.idle.label()
        );
        eprintln!();
    }

    /// The command's share for `--json`.
    pub fn json(&self, pid: u32) -> quietwatt_attribution::document::CommandShare {
        let (c, t) = self.figures(pid);
        let scope = match self.scope {
            Scope::Cgroup(_) => "cgroup",
            Scope::Tree(_) => "process tree",
        };
        quietwatt_attribution::document::CommandShare::new(scope, &c, t, self.idle.label())
    }
}
