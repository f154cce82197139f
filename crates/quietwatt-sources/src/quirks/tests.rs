use super::*;

fn intel(model: u32) -> CpuInfo {
    CpuInfo {
        vendor: Vendor::Intel,
        family: Some(6),
        model: Some(model),
        model_name: String::new(),
        flags: Vec::new(),
    }
}

fn intel_fm(family: u32, model: u32) -> CpuInfo {
    CpuInfo {
        family: Some(family),
        ..intel(model)
    }
}

/// A unit register with power units 3, ESU `esu`, time units 10.
fn unit_reg(esu: u64) -> u64 {
    0xA_0000 | (esu << 8) | 0x3
}

#[test]
fn a_model_in_perfs_table_is_known() {
    // Kaby Lake (this project's VM host) and Skylake-X (a quirk row).
    for m in [0x9E, 0x55] {
        assert_eq!(coverage(&intel(m)), Coverage::PerfAndPowercap, "{m:#x}");
        assert_eq!(unknown_model_warning(&intel(m)), None, "{m:#x}");
        assert_eq!(perf_absence_note(&intel(m)), None, "{m:#x}");
    }
    // Arrow Lake U is in both tables (perf since 2024, powercap too): known.
    assert_eq!(coverage(&intel(0xB5)), Coverage::PerfAndPowercap);
    assert_eq!(unknown_model_warning(&intel(0xB5)), None);
}

#[test]
fn a_model_only_in_powercaps_table_is_known_and_perf_is_said_to_be_missing() {
    // Rocket Lake and Bay Trail (an inverted-unit Atom) are powercap-only.
    for m in [0xA7, 0x37] {
        let cpu = intel(m);
        assert_eq!(coverage(&cpu), Coverage::PowercapOnly, "{m:#x}");
        assert_eq!(unknown_model_warning(&cpu), None, "{m:#x}");
        let note = perf_absence_note(&cpu).expect("a perf note");
        assert!(
            note.contains("not perf's") && note.contains("powercap or msr mechanism"),
            "{note}"
        );
    }
    assert!(perf_absence_note(&intel(0xA7))
        .unwrap()
        .contains("(ROCKETLAKE)"));
    // Nova Lake is family 18, not 6: the family must be matched too.
    let mut nvl = intel(0x01);
    nvl.family = Some(18);
    assert_eq!(coverage(&nvl), Coverage::PowercapOnly);
    assert_eq!(
        coverage(&intel(0x01)),
        Coverage::Unknown,
        "family 6 model 1"
    );
}

#[test]
fn tpmi_parts_and_made_up_models_get_the_unknown_model_warning() {
    for (m, name) in [
        (0xAD, "GRANITERAPIDS_X"),
        (0xAE, "GRANITERAPIDS_D"),
        (0xAF, "ATOM_CRESTMONT_X"),
    ] {
        assert_eq!(coverage(&intel(m)), Coverage::Tpmi, "{name}");
        let w = unknown_model_warning(&intel(m)).expect(name);
        assert!(
            w.contains(name)
                && w.contains("TPMI")
                && w.contains("neither")
                && w.contains("6.10")
                && w.contains("can fall"),
            "{w}"
        );
    }
    // A model number no table has.
    let w = unknown_model_warning(&intel(0x01)).expect("model 0x1 is unknown");
    assert!(
        w.contains("model 0x1")
            && w.contains("neither")
            && w.contains("quietwatt check")
            && !w.contains("TPMI"),
        "{w}"
    );
    let mut blank = intel(0x9E);
    blank.model = None;
    assert!(unknown_model_warning(&blank)
        .expect("no model")
        .contains("unknown"));
}

#[test]
fn amd_and_hygon_families_follow_both_tables() {
    let mut cpu = intel(0x01);
    cpu.vendor = Vendor::Amd;
    for f in [0x17, 0x19, 0x1A] {
        cpu.family = Some(f);
        assert_eq!(coverage(&cpu), Coverage::PerfAndPowercap, "AMD {f:#x}");
    }
    // A Zen family powercap does not list yet: perf (CPUID RAPL bit) still
    // knows it, and AMD has no unit quirk, so no warning.
    cpu.family = Some(0x1B);
    assert_eq!(coverage(&cpu), Coverage::PerfOnly);
    assert_eq!(unknown_model_warning(&cpu), None);
    cpu.family = Some(0x15);
    assert!(unknown_model_warning(&cpu).is_some(), "pre-Zen AMD");
    cpu.vendor = Vendor::Hygon;
    cpu.family = Some(0x18);
    assert_eq!(coverage(&cpu), Coverage::PerfAndPowercap);
}

#[test]
fn unit_quirks_are_exactly_the_kernels_model_lists() {
    // perf: model_hsx/model_knl carry the fixed DRAM unit, model_spr the 1 J psys.
    for r in PERF_INTEL_MODELS {
        let cpu = intel_fm(r.family, r.model);
        let dram = energy_unit(&cpu, Domain::Dram, unit_reg(14)).0;
        let psys = energy_unit(&cpu, Domain::Psys, unit_reg(14)).0;
        let hsw = matches!(r.driver_data, "model_hsx" | "model_knl");
        assert_eq!(dram == EnergyUnit::PowerOfTwo(16), hsw, "{} dram", r.name);
        let spr = r.driver_data == "model_spr";
        assert_eq!(psys == EnergyUnit::PowerOfTwo(0), spr, "{} psys", r.name);
    }
    // powercap: hsw_server and spr_server rows are where powercap applies the same
    // quirk; the Atom defaults are the inverted-unit rows.
    for r in POWERCAP_INTEL_MODELS {
        let cpu = intel_fm(r.family, r.model);
        let rows: Vec<_> = quirks_for(&cpu).collect();
        let want = match r.driver_data {
            "rapl_defaults_hsw_server" => Some(Quirk::FixedDramUnit),
            "rapl_defaults_spr_server" => Some(Quirk::FixedPsysUnit),
            d if ATOM_DEFAULTS.contains(&d) => Some(Quirk::InvertedUnit),
            _ => None,
        };
        match want {
            Some(q) => assert!(
                rows.iter()
                    .any(|row| row.quirk == q && row.powercap_applies()),
                "{}: powercap's {} has no matching quirk row",
                r.name,
                r.driver_data
            ),
            None => assert!(
                rows.iter().all(|row| !row.powercap_applies()),
                "{}: a quirk row claims powercap applies it, but powercap's {} does not",
                r.name,
                r.driver_data
            ),
        }
    }
    // Every quirk row comes from one of the two tables.
    for q in QUIRKS {
        let perf = find(PERF_INTEL_MODELS, q.family, q.model);
        let pc = find(POWERCAP_INTEL_MODELS, q.family, q.model);
        assert!(
            perf.is_some() || pc.is_some(),
            "{q:?} is in no kernel table"
        );
    }
    // Broadwell-D: perf fixes DRAM, powercap does not.
    let bdx_d = quirks_for(&intel(0x56)).next().expect("BROADWELL_D row");
    assert_eq!(bdx_d.quirk, Quirk::FixedDramUnit);
    assert!(!bdx_d.powercap_applies());
    assert!(quirks_for(&intel(0x55)).all(super::QuirkRow::powercap_applies));
}

#[test]
fn perf_domains_follow_the_model_structs() {
    let of = |m: u32| {
        let r = find(PERF_INTEL_MODELS, 6, m).expect("in perf's table");
        perf_model_domains(r.driver_data)
    };
    // Skylake-X (model_hsx): no uncore, no psys; Sapphire Rapids: psys, no uncore.
    assert!(!of(0x55).contains(&Domain::Psys) && of(0x55).contains(&Domain::Dram));
    assert!(of(0x8F).contains(&Domain::Psys) && !of(0x8F).contains(&Domain::Uncore));
    // Knights Landing: package and DRAM only.
    assert_eq!(of(0x57), &[Domain::Package, Domain::Dram]);
    for r in PERF_INTEL_MODELS {
        assert!(
            perf_model_domains(r.driver_data).contains(&Domain::Package),
            "{}: {} not understood",
            r.name,
            r.driver_data
        );
    }
}

#[test]
fn no_model_is_in_two_places_it_cannot_be() {
    for t in [PERF_INTEL_MODELS, POWERCAP_INTEL_MODELS, TPMI_INTEL_MODELS] {
        for (i, r) in t.iter().enumerate() {
            assert!(
                t[i + 1..]
                    .iter()
                    .all(|o| (o.family, o.model) != (r.family, r.model)),
                "{} twice",
                r.name
            );
        }
    }
    // TPMI parts are in neither MSR table (else the warning would be wrong).
    for r in TPMI_INTEL_MODELS {
        assert!(
            find(PERF_INTEL_MODELS, r.family, r.model).is_none(),
            "{}",
            r.name
        );
        assert!(
            find(POWERCAP_INTEL_MODELS, r.family, r.model).is_none(),
            "{}",
            r.name
        );
    }
    // perf's Intel models are all in powercap's table (so none is PerfOnly).
    for r in PERF_INTEL_MODELS {
        assert!(
            find(POWERCAP_INTEL_MODELS, r.family, r.model).is_some(),
            "{}",
            r.name
        );
    }
}

#[test]
fn esu_is_bits_12_to_8() {
    assert_eq!(energy_status_units(0x000A_0E03), 14);
    assert_eq!(energy_status_units(0xFFFF_FFFF_FFFF_1003), 16);
    assert_eq!(energy_status_units(0x1F00), 31);
}

#[test]
fn skylake_x_dram_is_2_pow_minus_16_while_the_register_says_14() {
    let skx = intel(0x55);
    let (u, q) = energy_unit(&skx, Domain::Dram, unit_reg(14));
    assert_eq!(u, EnergyUnit::PowerOfTwo(16));
    assert_eq!(q.map(|r| r.model_name), Some("SKYLAKE_X"));
    // The other domains keep the register's unit.
    assert_eq!(
        energy_unit(&skx, Domain::Package, unit_reg(14)),
        (EnergyUnit::PowerOfTwo(14), None)
    );
    // Broadwell-D follows perf's table: fixed too.
    assert_eq!(
        energy_unit(&intel(0x56), Domain::Dram, unit_reg(14)).0,
        EnergyUnit::PowerOfTwo(16)
    );
    // A client Skylake (0x5E) has no quirk.
    assert_eq!(
        energy_unit(&intel(0x5E), Domain::Dram, unit_reg(14)).0,
        EnergyUnit::PowerOfTwo(14)
    );
}

#[test]
fn sapphire_rapids_psys_is_one_joule() {
    let spr = intel(0x8F);
    assert_eq!(
        energy_unit(&spr, Domain::Psys, unit_reg(14)).0,
        EnergyUnit::PowerOfTwo(0)
    );
    assert_eq!(EnergyUnit::PowerOfTwo(0).to_joules(3).0, 3.0);
    // SPR's DRAM uses the register (the SPR DRAM quirk was removed from perf).
    assert_eq!(
        energy_unit(&spr, Domain::Dram, unit_reg(14)).0,
        EnergyUnit::PowerOfTwo(14)
    );
    assert_eq!(
        energy_unit(&intel(0xCF), Domain::Psys, unit_reg(16)).0,
        EnergyUnit::PowerOfTwo(0)
    );
}

#[test]
fn atom_units_are_inverted_microjoules() {
    // Bay Trail with ESU 5: 2^5 µJ = 32 µJ per step, for every domain.
    for d in [Domain::Package, Domain::Core] {
        let (u, q) = energy_unit(&intel(0x37), d, unit_reg(5));
        assert_eq!(u, EnergyUnit::Scale(32e-6));
        assert_eq!(q.map(|r| r.quirk), Some(Quirk::InvertedUnit));
    }
    for m in [0x4C, 0x4A, 0x5A] {
        assert_eq!(
            energy_unit(&intel(m), Domain::Package, unit_reg(0)).0,
            EnergyUnit::Scale(1e-6)
        );
    }
}

#[test]
fn vendor_and_family_must_match_too() {
    let mut amd = intel(0x55);
    amd.vendor = Vendor::Amd;
    assert_eq!(energy_unit(&amd, Domain::Dram, unit_reg(16)).1, None);
    let mut fam15 = intel(0x55);
    fam15.family = Some(15);
    assert_eq!(quirks_for(&fam15).count(), 0);
}

#[test]
fn every_row_names_its_source_and_none_is_repeated() {
    for (i, r) in QUIRKS.iter().enumerate() {
        assert!(r.source.contains(".c "), "{r:?}");
        for o in &QUIRKS[i + 1..] {
            assert!(
                (r.vendor, r.family, r.model, r.quirk) != (o.vendor, o.family, o.model, o.quirk),
                "duplicate row for model {:#x}",
                r.model
            );
        }
    }
}
