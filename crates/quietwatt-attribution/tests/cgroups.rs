//! cgroup ids resolved to paths and readable names, with real cgroups the test
//! creates under the cgroup v2 hierarchy and processes moved into them by writing
//! `cgroup.procs`; the accounting program must report those processes' slices with
//! the same ids. Needs root, cgroup v2 and a kernel with BTF; fails loudly without.

use quietwatt_attribution::names::cgroup2_mount;
use quietwatt_attribution::{By, Entity, Names, OwnCgroup, Timeline, Tracker, Usage};
use std::process::Command;
use std::time::Duration;

fn loudly<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| {
        panic!("\n\n*** quietwatt-attribution: {what} failed: {e}\n*** This test needs root, cgroup v2 and a kernel with BTF.\n\n")
    })
}

#[test]
fn cgroups_the_test_creates_are_named_and_their_processes_accounted() {
    let v2 = loudly("finding the cgroup v2 mount", cgroup2_mount());
    let top = loudly(
        "creating a cgroup",
        OwnCgroup::create_in(&v2, &format!("qw-names-{}.slice", std::process::id())),
    );
    let id = "4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b";
    let container = loudly(
        "creating a nested cgroup",
        OwnCgroup::create_in(top.path(), &format!("docker-{id}.scope")),
    );
    let unit = loudly(
        "creating a nested cgroup",
        OwnCgroup::create_in(top.path(), "job7.service"),
    );

    let mut tracker = loudly("loading the accounting program", Tracker::open());
    let t0 = quietwatt::ticker::monotonic_ns();
    // Two busy processes, moved in after they start (as a container runtime does).
    let spin = || {
        Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spin(), spin());
    loudly("moving a process into its cgroup", container.add(a.id()));
    loudly("moving a process into its cgroup", unit.add(b.id()));
    a.wait().unwrap();
    b.wait().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let mut timeline = Timeline::new();
    tracker.drain(&mut timeline);
    let t1 = quietwatt::ticker::monotonic_ns();
    let mut u = vec![Usage::default()];
    timeline.usage(t0, t1, By::Cgroup, |_| Some(0), &mut u);
    let ns = |c: &OwnCgroup| {
        u[0].by_entity
            .get(&Entity::Cgroup(c.id()))
            .copied()
            .unwrap_or(0)
    };
    eprintln!(
        "container cgroup {} ns, unit cgroup {} ns",
        ns(&container),
        ns(&unit)
    );
    assert!(
        ns(&container) > 10_000_000,
        "the container's process ran in it"
    );
    assert!(ns(&unit) > 10_000_000, "the unit's process ran in it");

    let mut names = Names::under(Some(v2.clone()));
    let top_rel = format!("/qw-names-{}.slice", std::process::id());
    let (path, name) = names
        .cgroup(container.id())
        .expect("the container's cgroup is found");
    assert_eq!(path, format!("{top_rel}/docker-{id}.scope"));
    assert_eq!(name, "docker:4f3c2a1b0e9d");
    let (path, name) = names.cgroup(unit.id()).expect("the unit's cgroup is found");
    assert_eq!(
        (path, name),
        (format!("{top_rel}/job7.service").as_str(), "job7.service")
    );
    let (_, name) = names.cgroup(top.id()).unwrap();
    assert_eq!(name, format!("qw-names-{}.slice", std::process::id()));
    assert!(names.cgroup(u64::MAX).is_none());

    // Cleaned up: the processes have ended, the directories go (children first).
    loudly("removing a cgroup", container.remove());
    loudly("removing a cgroup", unit.remove());
    let top_path = top.path().to_path_buf();
    loudly("removing a cgroup", top.remove());
    assert!(!top_path.exists());
}
