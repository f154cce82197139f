//! The unknown-model warning reaches the user: `quietwatt list` on an emulated
//! Granite Rapids X (family 6, model 0xAD), a part the kernel reads through TPMI and
//! neither of its MSR model tables lists.

use crate::common;

use crate::common::{mount, quietwatt, stdout};
use quietwatt_emulator::EmulatorConfig;

#[test]
fn list_warns_that_granite_rapids_x_is_read_through_tpmi() {
    let m = mount(EmulatorConfig::intel(0xAD));
    let o = quietwatt(m.root(), &["list", "--mechanism", "msr"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", common::stderr(&o));
    let note = out
        .lines()
        .find(|l| l.contains("note:") && l.contains("GRANITERAPIDS_X"))
        .unwrap_or_else(|| {
            panic!("`list --mechanism msr` printed no model warning for model 0xAD:\n{out}")
        });
    assert!(
        note.contains("TPMI") && note.contains("neither"),
        "the warning must say the part is read through TPMI and is in neither MSR table: {note}"
    );
}

#[test]
fn list_gives_kaby_lake_no_model_warning() {
    // The default emulated CPU (Kaby Lake, 0x9E) is in both tables: no warning, so
    // the test above is not passing on a note every CPU gets.
    let m = mount(EmulatorConfig::default());
    let o = quietwatt(m.root(), &["list", "--mechanism", "msr"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", common::stderr(&o));
    assert!(
        !out.contains("model table"),
        "Kaby Lake got a model warning:\n{out}"
    );
}
