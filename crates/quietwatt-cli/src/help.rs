//! The examples at the end of each command's `--help` (clap's `after_help`): one
//! place, so that every command has one (`tests/cli_habits.rs` checks) and they read
//! alike. Each starts with "Examples:".

/// `quietwatt list --help`.
pub const LIST: &str = "\
Examples:
  quietwatt list                  mechanisms and domains per socket
  quietwatt list -m msr --json    one mechanism, as JSON";

/// `quietwatt doctor --help`.
pub const DOCTOR: &str = "\
Examples:
  quietwatt doctor                every mechanism, with the fix for each that fails
  quietwatt doctor -m perf --json one mechanism, as JSON";

/// `quietwatt run --help`.
pub const RUN: &str = "\
Examples:
  quietwatt run -- make -j8                     the table on stderr
  quietwatt run --json -o r.json -- ./bench     the JSON object in r.json, the
                                                command's output left alone
  quietwatt run -r 10 --warmup 2 -- ./bench     mean ± CI over 10 runs
  quietwatt run -m powercap -d package,dram -f 100 -- sleep 1";

/// `quietwatt record --help`.
pub const RECORD: &str = "\
Examples:
  quietwatt record -o energy.csv --duration 10s      10 s at the default rate
  quietwatt record -o run.parquet -f 1000 -- ./bench while a command runs
  quietwatt record -o - --format jsonl --duration 500ms | head";

/// `quietwatt check --help`.
pub const CHECK: &str = "\
Examples:
  quietwatt check                        every mechanism over 1 s, domains that disagree
  quietwatt check --interval 500ms --json";

/// `quietwatt compare --help` (and `bench energy`).
pub const COMPARE: &str = "\
Examples:
  quietwatt compare 'gzip -k big.txt' 'zstd -k big.txt'
  quietwatt compare -r 20 -w 3 --export-markdown cmp.md './old' './new'
  quietwatt compare --fail-if-more-than 5 './old' './new'   exit 3 on a regression";

/// `quietwatt bench --help`.
pub const BENCH: &str = "\
Examples:
  quietwatt bench sampler --duration 5s      the sampler against its floor
  quietwatt bench latency --json             the cost of each primitive";

/// `quietwatt bench sampler --help`.
pub const BENCH_SAMPLER: &str = "\
Examples:
  quietwatt bench sampler -f 1000 --duration 10s --rounds 3
  quietwatt bench sampler --stand-in --json      without RAPL";

/// `quietwatt bench latency --help`.
pub const BENCH_LATENCY: &str = "\
Examples:
  quietwatt bench latency --iterations 100000 --cpu 2";

/// `quietwatt bench workload --help`.
pub const BENCH_WORKLOAD: &str = "\
Examples:
  quietwatt run -- quietwatt bench workload ep --threads 4";

/// `quietwatt bench overhead --help`.
pub const BENCH_OVERHEAD: &str = "\
Examples:
  quietwatt bench overhead -o lab/ --workload ep --reps 10
  quietwatt bench overhead -o lab/ --report-only     the table of a finished run";

/// `quietwatt bench wakeup --help`.
pub const BENCH_WAKEUP: &str = "\
Examples:
  quietwatt bench wakeup --caller-cpu 0 --callee-cpu 3 --interval-ms 10 --json";

/// `quietwatt model --help`.
pub const MODEL: &str = "\
Examples:
  quietwatt model all -o model.json
  quietwatt model validate --model model.json";

/// `quietwatt model pagefault --help`.
pub const MODEL_PAGEFAULT: &str = "\
Examples:
  quietwatt model pagefault -o model.json --rounds 5";

/// `quietwatt model ctxswitch --help`.
pub const MODEL_CTXSWITCH: &str = "\
Examples:
  quietwatt model ctxswitch -o model.json --cpu 2";

/// `quietwatt model wakeup --help`.
pub const MODEL_WAKEUP: &str = "\
Examples:
  quietwatt model wakeup -o model.json --cpu 0 --callee-cpu 3";

/// `quietwatt model all --help`.
pub const MODEL_ALL: &str = "\
Examples:
  quietwatt model all -o model.json --rounds 3";

/// `quietwatt model validate --help`.
pub const MODEL_VALIDATE: &str = "\
Examples:
  quietwatt model validate --model model.json --json";

/// `quietwatt trace --help`.
pub const TRACE: &str = "\
Examples:
  quietwatt record -o rec.csv --events all -- ./app
  quietwatt trace rec.csv --events rec.events.csv -o rec.trace.json";

/// `quietwatt serve --help`.
pub const SERVE: &str = "\
Examples:
  quietwatt serve --listen 127.0.0.1:9464
  curl -s 127.0.0.1:9464/metrics";

/// `quietwatt top --help`.
pub const TOP_CMD: &str = "\
Examples:
  sudo quietwatt top --by cgroup          live, on a terminal
  sudo quietwatt top -b -n 5 > watts.txt  five updates as plain text (batch mode)";

/// `quietwatt profile --help`.
pub const PROFILE: &str = "\
Examples:
  quietwatt profile -o energy.svg -- ./bench      an energy flame graph of a command
  quietwatt profile -o p.folded -F 499 -- make    folded stacks (µJ counts), 499 Hz
  quietwatt profile -a --duration 10s -o all.svg  the whole machine for 10 s
Kernel stacks need root, CAP_PERFMON or kernel.perf_event_paranoid <= 1 (-a: <= 0);
--user-only profiles a command of one's own with the default 2.";

/// `quietwatt calibrate --help`.
pub const CALIBRATE: &str = "\
Examples:
  sudo quietwatt calibrate -o model.json            on a machine with RAPL (one to three minutes)
  sudo quietwatt calibrate -o m.json --frequencies 0  leave the frequency to the governor
  quietwatt run --power-model model.json -- make    on a machine of the same CPU without RAPL
  QUIETWATT_POWER_MODEL=model.json pytest --energy  the same for Python and pytest
The model predicts package and DRAM power from the busy CPUs, and where they can be
read, their frequency (cpufreq) and instructions and cycles (the PMU); it keeps
simpler fits for machines that read fewer. Every estimate says ESTIMATED and
carries the model's stated error (docs/estimate.md).";

/// `quietwatt emulate --help`.
pub const EMULATE: &str = "\
Examples:
  quietwatt emulate /tmp/qwe --sockets 2 &
  quietwatt --root /tmp/qwe run -- sleep 1";
