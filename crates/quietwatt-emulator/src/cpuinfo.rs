//! `/proc/cpuinfo` of the emulated machine: one block per CPU, bare metal (no
//! `hypervisor` flag), AMD parts with the `rapl` flag (CPUID 0x80000007 EDX bit 14).

use crate::config::EmulatorConfig;
use crate::vendor::model_name;
use std::fmt::Write;

const INTEL_FLAGS: &str =
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 \
clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art \
arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 \
monitor ds_cpl vmx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid sse4_1 sse4_2 x2apic movbe popcnt \
tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb \
invpcid_single pti ssbd ibrs ibpb stibp tpr_shadow flexpriority ept vpid ept_ad fsgsbase \
tsc_adjust bmi1 avx2 smep bmi2 erms invpcid mpx rdseed adx smap clflushopt intel_pt xsaveopt \
xsavec xgetbv1 xsaves dtherm ida arat pln pts hwp hwp_notify hwp_act_window hwp_epp md_clear \
flush_l1d arch_capabilities";

const AMD_FLAGS: &str = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 \
clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good \
nopl nonstop_tsc cpuid extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid \
sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic \
cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core \
perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba ibrs ibpb stibp vmmcall \
fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a rdseed adx smap clflushopt clwb sha_ni \
xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf \
xsaveerptr rdpru wbnoinvd amd_ppin arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean \
flushbyasid decodeassists pausefilter pfthreshold v_vmsave_vmload vgif v_spec_ctrl umip pku \
ospke vaes vpclmulqdq rdpid overflow_recov succor smca";

/// The whole file.
pub(crate) fn cpuinfo(config: &EmulatorConfig) -> String {
    let vendor = config.vendor;
    let name = model_name(vendor);
    let flags = if vendor.is_amd() {
        AMD_FLAGS
    } else {
        INTEL_FLAGS
    };
    let per = config.cpus_per_socket;
    let mut out = String::new();
    for cpu in 0..config.cpus() {
        let socket = config.socket_of(cpu);
        let core = cpu % per.max(1);
        let apic = socket * per.next_power_of_two() + core;
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "processor\t: {cpu}\n\
             vendor_id\t: {vid}\n\
             cpu family\t: {family}\n\
             model\t\t: {model}\n\
             model name\t: {name}\n\
             stepping\t: 1\n\
             microcode\t: 0x1000065\n\
             cpu MHz\t\t: 2400.000\n\
             cache size\t: 1024 KB\n\
             physical id\t: {socket}\n\
             siblings\t: {per}\n\
             core id\t\t: {core}\n\
             cpu cores\t: {per}\n\
             apicid\t\t: {apic}\n\
             initial apicid\t: {apic}\n\
             fpu\t\t: yes\n\
             fpu_exception\t: yes\n\
             cpuid level\t: 22\n\
             wp\t\t: yes\n\
             flags\t\t: {flags}\n\
             bugs\t\t: spectre_v1 spectre_v2 spec_store_bypass\n\
             bogomips\t: 4800.00\n\
             clflush size\t: 64\n\
             cache_alignment\t: 64\n\
             address sizes\t: 46 bits physical, 48 bits virtual\n\
             power management:\n\n",
            vid = vendor.vendor_id(),
            family = vendor.family(),
            model = vendor.model(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_block_per_cpu_bare_metal() {
        let c = EmulatorConfig::default().with_sockets(2);
        let text = cpuinfo(&c);
        assert_eq!(text.matches("processor\t:").count(), 8);
        assert!(text.contains("physical id\t: 1\n"));
        assert!(text.contains("model\t\t: 158\n"));
        assert!(!text.contains("hypervisor"));
        assert!(!text.contains(" rapl "));
        let amd = cpuinfo(&EmulatorConfig::amd());
        assert!(amd.contains("AuthenticAMD") && amd.contains(" rapl "));
        assert!(amd.contains("cpu family\t: 25\n"));
    }
}
