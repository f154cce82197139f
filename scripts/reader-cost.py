#!/usr/bin/env python3
"""What reading energy through the local reader service costs, beside reading
the counters as root, and what the service itself costs (issue 26, item 6).

Set-up: quietwatt's emulator (`quietwatt emulate DIR`), and `quietwatt serve
--socket S --listen none -m powercap --freq 1000` as root with a policy that
lets `nobody` read every millisecond to 1 µJ (a loosened policy, as on a
dedicated benchmark host: the default, 100 ms, would make a 1 kHz Monitor a
10 Hz one and the comparison meaningless). Each round runs, in a shuffled
order:

- `blocks`: 300 empty `with quietwatt.measure(): pass` blocks in one Python
  process, as root (the emulator's counters, read locally) and as `nobody`
  (refused the counters, so read through the service): the median time of a
  block;
- `monitor`: a `quietwatt.Monitor(freq=1000)` for 5 s, as root and as nobody:
  the client process's CPU per second and the rate it got, and the service's
  CPU per second meanwhile;
- `idle`: the service's CPU per second over 5 s with no client, and with ten
  nobody clients each running a 1 kHz Monitor; the same for a second service
  as the systemd unit runs it (its default rate, 10 Hz, and the default
  policy's 100 ms and 1 mJ, here granted to nobody), where each of the ten
  Monitors gets a new reading every 100 ms.

Figures: medians over rounds with seeded 95 % bootstrap intervals, and the
ratio of nobody's to root's per round.

    sudo scripts/reader-cost.py [--rounds 5] QUIETWATT_BINARY

Needs root (setpriv to nobody) and the Python package in the interpreter that
runs this script (`.venv/bin/python scripts/reader-cost.py ...`)."""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _stats import median_ci

POLICY = "version = 1\n[[allow]]\nusers = [65534]\ninterval_ms = 1\nresolution_uj = 1\n"
DEFAULT_POLICY = "version = 1\n[[allow]]\nusers = [65534]\ninterval_ms = 100\nresolution_uj = 1000\n"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

CLIENT = r"""
import json, resource, statistics, sys, time, warnings
warnings.simplefilter("ignore")
import quietwatt as qw
what, n = sys.argv[1], float(sys.argv[2])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
if what == "blocks":
    with qw.measure() as m:
        pass
    ts = []
    for _ in range(int(n)):
        t0 = time.perf_counter()
        with qw.measure() as m:
            pass
        ts.append(time.perf_counter() - t0)
    print(json.dumps({"mechanism": m.mechanism, "block_s": statistics.median(ts)}))
else:
    mon = qw.Monitor(freq=1000)
    print("ready", flush=True)
    c0, t0 = cpu(), time.monotonic()
    with mon:
        time.sleep(n)
    wall, c = time.monotonic() - t0, cpu() - c0
    rows = sum(1 for d in mon.samples()["domain"] if d == "package")
    print(json.dumps({"mechanism": mon.result.mechanism, "cpu_per_s": c / wall, "rate_hz": rows / wall}))
"""


def proc_cpu(pid):
    """utime + stime of process `pid`, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("quietwatt")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("reader-cost: run it as root (it runs clients as nobody with setpriv)")
    qw = os.path.abspath(a.quietwatt)
    import quietwatt

    work = tempfile.mkdtemp(prefix="qw-reader-cost-")
    os.chmod(work, 0o755)
    # The package where nobody can import it (the venv may be in root's home).
    shutil.copytree(os.path.dirname(quietwatt.__file__), os.path.join(work, "py", "quietwatt"))
    for d, dirs, files in os.walk(os.path.join(work, "py")):
        for name in dirs + files:
            os.chmod(os.path.join(d, name), 0o755)
    os.chmod(os.path.join(work, "py"), 0o755)
    root = os.path.join(work, "emu")
    os.mkdir(root)
    sock = os.path.join(work, "reader.sock")
    sock_default = os.path.join(work, "default.sock")
    policy = os.path.join(work, "policy.toml")
    policy_default = os.path.join(work, "default.toml")
    for path, text in ((policy, POLICY), (policy_default, DEFAULT_POLICY)):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
    procs = []
    try:
        procs.append(subprocess.Popen([qw, "emulate", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for _ in range(200):
            if os.path.exists(os.path.join(root, "sys/class/powercap/intel-rapl:0/energy_uj")):
                break
            time.sleep(0.05)
        else:
            sys.exit("reader-cost: the emulator did not come up")

        def serve(path, policy, freq):
            p = subprocess.Popen(
                [qw, "--root", root, "serve", "--listen", "none", "-m", "powercap"]
                + (["--freq", freq] if freq else [])
                + ["--socket", path, "--policy", policy],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            procs.append(p)
            for _ in range(600):
                if os.path.exists(path):
                    return p
                time.sleep(0.05)
            sys.exit("reader-cost: serve --socket did not start")

        service = serve(sock, policy, "1000")
        service_default = serve(sock_default, policy_default, None)
        python = os.path.realpath(sys.executable)
        env = dict(os.environ, QUIETWATT_ROOT=root, PYTHONPATH=os.path.join(work, "py"), PYTHONDONTWRITEBYTECODE="1")
        env.pop("QUIETWATT_SOCKET", None)
        as_nobody = dict(env, QUIETWATT_SOCKET=sock)

        def client(who, what, n, socket=sock):
            argv = [python, "-c", CLIENT, what, str(n)]
            argv = NOBODY + argv if who == "nobody" else argv
            e = dict(as_nobody, QUIETWATT_SOCKET=socket) if who == "nobody" else env
            return subprocess.Popen(argv, env=e, cwd="/",
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def result(p):
            out, err = p.communicate(timeout=300)
            if p.returncode != 0:
                sys.exit(f"reader-cost: a client failed: {err.strip()[-800:]}")
            return json.loads(out.strip().splitlines()[-1])

        expected = {"root": "powercap", "nobody": "socket"}
        rng = random.Random(26)
        figures = {}

        def add(key, value):
            figures.setdefault(key, []).append(value)

        for r in range(a.rounds):
            jobs = [(w, k) for w in ("root", "nobody") for k in ("blocks", "monitor")]
            jobs += [(w, n) for w in ("idle", "idle-default") for n in (0, 10)]
            rng.shuffle(jobs)
            for who, what in jobs:
                if who.startswith("idle"):
                    default = who == "idle-default"
                    svc, at = (service_default, sock_default) if default else (service, sock)
                    name = "service at 10 Hz, 100 ms policy" if default else "service at 1 kHz, 1 ms policy"
                    ps = [client("nobody", "monitor", a.seconds + 1, at) for _ in range(what)]
                    for p in ps:
                        p.stdout.readline()
                    c0, t0 = proc_cpu(svc.pid), time.monotonic()
                    time.sleep(a.seconds)
                    add(f"{name}, {what} clients (s/s)", (proc_cpu(svc.pid) - c0) / (time.monotonic() - t0))
                    for p in ps:
                        doc = result(p)
                        add(f"{name}: rows a second of each of ten 1 kHz Monitors", doc["rate_hz"])
                    continue
                n = a.blocks if what == "blocks" else a.seconds
                c0, t0 = proc_cpu(service.pid), time.monotonic()
                doc = result(client(who, what, n))
                served = (proc_cpu(service.pid) - c0) / (time.monotonic() - t0)
                if doc["mechanism"] != expected[who]:
                    sys.exit(f"reader-cost: {who} read through {doc['mechanism']}, not {expected[who]}")
                if what == "blocks":
                    add(f"block, {who} (µs)", doc["block_s"] * 1e6)
                else:
                    add(f"monitor CPU, {who} (s/s)", doc["cpu_per_s"])
                    add(f"monitor rows a second, {who}", doc["rate_hz"])
                    add(f"service during monitor, {who} (s/s)", served)
            print(f"reader-cost: round {r + 1}/{a.rounds} done", file=sys.stderr)
        for k in ("block", "monitor CPU"):
            add_ratio = [n / r for n, r in zip(figures[f"{k}, nobody" + (" (µs)" if k == "block" else " (s/s)")],
                                               figures[f"{k}, root" + (" (µs)" if k == "block" else " (s/s)")])]
            figures[f"{k}: nobody / root"] = add_ratio
        print("| figure | median [95 % CI] | rounds |\n|---|---:|---:|")
        for k, xs in sorted(figures.items()):
            m, lo, hi = median_ci(xs, rng)
            print(f"| {k} | {m:.4g} [{lo:.4g}, {hi:.4g}] | {len(xs)} |")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for tool in ("fusermount3", "fusermount", "umount"):
            if shutil.which(tool):
                subprocess.run([tool, "-u", root] if tool != "umount" else [tool, root],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                break
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
