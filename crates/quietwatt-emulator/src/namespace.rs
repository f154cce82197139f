//! Making the emulator look like `/` to any program: `enter.sh`, a script served
//! at `.quietwatt-emulator/enter.sh`, grafts the emulated paths over the standard
//! ones inside a private mount namespace, then runs a command there.
//!
//! ```text
//! sh DIR/.quietwatt-emulator/enter.sh [COMMAND [ARG]...]
//! ```
//!
//! The script re-runs itself under `unshare --mount --propagation private`, so
//! nothing it mounts is ever visible outside (and it all disappears with the
//! command). There it bind-mounts each emulated path over its standard one. A
//! standard path that does not exist on the host (`/sys/class/powercap` on a
//! machine without RAPL) cannot be created in sysfs, so its parent directory is
//! first made writable in the namespace: the parent is bind-mounted aside (into a
//! tmpfs mounted on the emulator's `.quietwatt-emulator/stash`), a tmpfs is mounted
//! over it, and each original entry is bind-mounted (or, for symlinks, recreated)
//! back into it, so everything else under it keeps working.

use crate::config::EmulatorConfig;
use std::fmt::Write;
use std::path::Path;

/// The emulated paths grafted over the standard ones (relative to the mount).
pub(crate) fn grafts(config: &EmulatorConfig) -> Vec<&'static str> {
    let mut g = vec![
        "sys/devices/system/cpu",
        "sys/devices/virtual/powercap",
        "sys/class/powercap",
        "sys/devices/power",
        "sys/bus/event_source/devices/power",
    ];
    if config.vendor.is_amd() {
        g.push("sys/devices/power_core");
        g.push("sys/bus/event_source/devices/power_core");
    }
    g.push("proc/cpuinfo");
    g.push("dev/cpu");
    g
}

/// Quotes `s` for a POSIX shell.
pub(crate) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script for an emulator mounted at `mountpoint`.
pub(crate) fn enter_script(mountpoint: &Path, config: &EmulatorConfig) -> String {
    let e = shell_quote(&mountpoint.to_string_lossy());
    let mut s = String::new();
    let _ = write!(
        s,
        r#"#!/bin/sh
# quietwatt-emulator: run a command that sees the emulated RAPL device mounted at
# {e} as the real /sys, /proc/cpuinfo and /dev/cpu.
#
#   sh {e}/.quietwatt-emulator/enter.sh [COMMAND [ARG]...]    (as root)
#
# COMMAND (default: $SHELL) runs in a private mount namespace: nothing mounted here
# is visible outside it, and it all goes away when COMMAND exits.
set -eu
E={e}
if [ "${{QUIETWATT_EMULATOR_NS:-}}" != "$$" ]; then
  # Re-run in a new private mount namespace; $$ there is the unshare'd shell's pid.
  exec unshare --mount --propagation private sh -c \
    'QUIETWATT_EMULATOR_NS=$$; export QUIETWATT_EMULATOR_NS; exec sh "$0" "$@"' "$0" "$@"
fi
unset QUIETWATT_EMULATOR_NS
mount --make-rprivate /
S="$E/.quietwatt-emulator/stash"
mount -t tmpfs -o mode=0700 quietwatt-stash "$S"
W=" "
n=0

# Make directory $1 writable in this namespace, keeping every entry it holds.
writable() {{
  case "$W" in *" $1 "*) return 0 ;; esac
  n=$((n + 1))
  mkdir "$S/$n"
  mount --rbind "$1" "$S/$n"
  mount -t tmpfs -o mode=0755 quietwatt-layer "$1"
  for e in "$S/$n"/* "$S/$n"/.[!.]* "$S/$n"/..?*; do
    b=${{e##*/}}
    if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$1/$b"
    elif [ -d "$e" ]; then mkdir "$1/$b"; mount --rbind "$e" "$1/$b"
    elif [ -e "$e" ]; then : > "$1/$b"; mount --bind "$e" "$1/$b"
    fi
  done
  W="$W$1 "
}}

# Make sure directory $1 exists.
need_dir() {{
  [ -d "$1" ] && return 0
  need_dir "$(dirname "$1")"
  writable "$(dirname "$1")"
  mkdir "$1"
  W="$W$1 "
}}

# Put emulated path $1 (relative to $E) at /$1.
graft() {{
  if [ -L "$E/$1" ]; then
    if [ -e "/$1" ] || [ -L "/$1" ]; then return 0; fi
    need_dir "$(dirname "/$1")"
    writable "$(dirname "/$1")"
    ln -s "$(readlink "$E/$1")" "/$1"
    return 0
  fi
  if [ ! -e "/$1" ]; then
    need_dir "$(dirname "/$1")"
    writable "$(dirname "/$1")"
    if [ -d "$E/$1" ]; then mkdir "/$1"; else : > "/$1"; fi
  fi
  mount --bind "$E/$1" "/$1"
}}

"#
    );
    for g in grafts(config) {
        let _ = writeln!(s, "graft {g}");
    }
    s.push_str("\nif [ $# -eq 0 ]; then set -- \"${SHELL:-/bin/sh}\"; fi\nexec \"$@\"\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_lists_grafts() {
        assert_eq!(shell_quote("/tmp/a'b"), r"'/tmp/a'\''b'");
        let s = enter_script(Path::new("/tmp/emu"), &EmulatorConfig::amd());
        assert!(s.contains("E='/tmp/emu'\n"));
        assert!(s.contains("graft sys/devices/power_core\n"));
        assert!(s.contains("graft dev/cpu\n"));
        let intel = enter_script(Path::new("/x"), &EmulatorConfig::default());
        assert!(!intel.contains("power_core"));
    }
}
