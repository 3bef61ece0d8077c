"""Watch latency and idle cost (issue 12): one run, side by side, ending with a RESULT line.

    .venv/bin/python benches/watch.py [--bin target/release/dumpview] [--landings 20] [--idle 60]

- headless: `dumpview watch DIR --json` is started on an empty directory; a manifest is then
  landed as the probe writes it (a temporary file renamed into place) as a new rank, 20 times;
  the latency is from the rename to the `window` event of that rank on stdout.
- screen: the workbench (`dumpview --watch DIR`) in tmux; the latency is from the rename to the
  first capture of the pane whose header counts the new window (`[k/k]`).
- ssh: the same headless watch over loopback ssh (`ssh://127.0.0.1:PORT/DIR`), against an sshd
  this script starts on a free port with throwaway keys (skipped when /usr/sbin/sshd is absent),
  at the default 1 s poll; the latency includes waiting for the next listing.
- idle: the CPU time (user + system, /proc/<pid>/stat) of a headless watch over --idle seconds
  with nothing landing, as a fraction of one core; over ssh also with the ssh processes it
  runs (one per listing, waited for, and the ControlMaster).

Goals: local <= 0.5 s, ssh <= 2 s (p95) at the default poll; idle CPU under 1% of one core.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "assets/examples/llama_fp16_overflow/a/rank0/match1-occ1/manifest.json")


def land(root, rank):
    """Write rank ``rank``'s manifest as the probe does; return the time of the rename."""
    with open(MANIFEST) as handle:
        manifest = json.load(handle)
    manifest["rank"] = rank
    window = os.path.join(root, "rank%d" % rank, "match1-occ1")
    os.makedirs(window, exist_ok=True)
    partial = os.path.join(window, ".manifest.json.tmp")
    with open(partial, "w") as handle:
        json.dump(manifest, handle)
    renamed = time.monotonic()
    os.rename(partial, os.path.join(window, "manifest.json"))
    return renamed


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def headless(binary, landings):
    root = tempfile.mkdtemp(prefix="dv-watch-")
    proc = subprocess.Popen([binary, "watch", root, "--json"], stdout=subprocess.PIPE, text=True)
    seen = {}
    def read():
        for line in proc.stdout:
            event = json.loads(line)
            if event["kind"] == "window":
                seen.setdefault(event["rank"], time.monotonic())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(1.0)
    latencies = []
    for rank in range(landings):
        renamed = land(root, rank)
        deadline = time.monotonic() + 10
        while rank not in seen and time.monotonic() < deadline:
            time.sleep(0.002)
        latencies.append(seen.get(rank, float("inf")) - renamed)
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    shutil.rmtree(root)
    return latencies


def screen(binary, landings):
    if shutil.which("tmux") is None:
        return []
    root = tempfile.mkdtemp(prefix="dv-watch-screen-")
    socket = os.path.join(root, "tmux.sock")
    tmux = ["tmux", "-S", socket]
    subprocess.run(tmux + ["new-session", "-d", "-x", "140", "-y", "35", binary, "--watch", root], check=True)
    time.sleep(1.0)
    latencies = []
    try:
        for rank in range(landings):
            renamed = land(root, rank)
            want = "[%d/%d]" % (1, rank + 1) if rank else "[1/1]"
            deadline = time.monotonic() + 10
            seen = float("inf")
            while time.monotonic() < deadline:
                text = subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True, text=True).stdout
                if "/%d]" % (rank + 1) in text:
                    seen = time.monotonic()
                    break
                time.sleep(0.005)
            latencies.append(seen - renamed)
            time.sleep(0.2)
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    return latencies


def start_sshd(work):
    """An sshd on 127.0.0.1 (free port, throwaway keys); returns (process, ssh command)."""
    import socket
    if not os.path.exists("/usr/sbin/sshd"):
        return None, None
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(work, key)], check=True)
    shutil.copy(os.path.join(work, "client_key.pub"), os.path.join(work, "authorized_keys"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = os.path.join(work, "sshd_config")
    with open(config, "w") as handle:
        handle.write("ListenAddress 127.0.0.1\nPort %d\nHostKey %s/host_key\nAuthorizedKeysFile %s/authorized_keys\n"
                     "PidFile %s/sshd.pid\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
                     "PasswordAuthentication no\nKbdInteractiveAuthentication no\n" % (port, work, work, work))
    with open(os.path.join(work, "host_key.pub")) as handle:
        host_key = handle.read().strip()
    with open(os.path.join(work, "known_hosts"), "w") as handle:
        handle.write("[127.0.0.1]:%d %s\n" % (port, host_key))
    client = os.path.join(work, "ssh_config")
    with open(client, "w") as handle:
        handle.write("Host *\n  IdentityFile %s/client_key\n  UserKnownHostsFile %s/known_hosts\n"
                     "  StrictHostKeyChecking yes\n  IdentitiesOnly yes\n" % (work, work))
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", config, "-p", str(port)],
                            stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, (port, "ssh -F %s" % client)


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (field 3 is index 0)."""
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid):
    """User + system CPU seconds of process ``pid`` so far (/proc/<pid>/stat)."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid):
    """CPU seconds of ``pid`` and everything it started: its own, its children's that it
    waited for (cutime + cstime: the ssh runs of each listing), and its live descendants'
    (the ssh ControlMaster)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(int(stat_fields(int(entry))[1]), []).append(int(entry))
            except (OSError, IndexError):
                pass
    total, stack = 0.0, [pid]
    while stack:
        p = stack.pop()
        try:
            fields = stat_fields(p)
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        stack.extend(children.get(p, []))
    return total


def over_ssh(binary, landings, idle):
    """Latencies of ``landings`` over loopback ssh, and the watch's idle CPU (fraction of a
    core over ``idle`` s) afterwards: dumpview alone, and with its ssh processes."""
    work = tempfile.mkdtemp(prefix="dv-watch-ssh-")
    server, found = start_sshd(work)
    if server is None:
        return [], float("nan"), float("nan")
    port, ssh = found
    root = os.path.join(work, "dumps")
    os.makedirs(root)
    proc = subprocess.Popen([binary, "watch", "ssh://127.0.0.1:%d%s" % (port, root), "--json",
                             "--ssh-command", ssh, "--cache-dir", os.path.join(work, "cache")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = {}
    def read():
        for line in proc.stdout:
            event = json.loads(line)
            if event["kind"] == "window":
                seen.setdefault(event["rank"], time.monotonic())
    threading.Thread(target=read, daemon=True).start()
    time.sleep(2.0)
    latencies = []
    for rank in range(landings):
        renamed = land(root, rank)
        deadline = time.monotonic() + 15
        while rank not in seen and time.monotonic() < deadline:
            time.sleep(0.005)
        latencies.append(seen.get(rank, float("inf")) - renamed)
        time.sleep(0.3)
    start, tree, t0 = cpu_seconds(proc.pid), tree_cpu_seconds(proc.pid), time.monotonic()
    time.sleep(idle)
    elapsed = time.monotonic() - t0
    idle_fraction = (cpu_seconds(proc.pid) - start) / elapsed
    tree_fraction = (tree_cpu_seconds(proc.pid) - tree) / elapsed
    proc.terminate()
    proc.wait()
    server.kill()
    server.wait()
    shutil.rmtree(work, ignore_errors=True)
    return latencies, idle_fraction, tree_fraction


def idle_cpu(binary, seconds):
    root = tempfile.mkdtemp(prefix="dv-watch-idle-")
    land(root, 0)
    proc = subprocess.Popen([binary, "watch", root, "--json"], stdout=subprocess.DEVNULL)
    time.sleep(2.0)
    start, t0 = cpu_seconds(proc.pid), time.monotonic()
    time.sleep(seconds)
    used, elapsed = cpu_seconds(proc.pid) - start, time.monotonic() - t0
    proc.kill()
    proc.wait()
    shutil.rmtree(root)
    return used / elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "target/release/dumpview"))
    parser.add_argument("--landings", type=int, default=20)
    parser.add_argument("--idle", type=float, default=60.0)
    args = parser.parse_args()
    if not os.path.exists(args.bin):
        sys.exit("%s missing: cargo build --release first (or --bin)" % args.bin)
    head = headless(args.bin, args.landings)
    scr = screen(args.bin, args.landings)
    ssh, ssh_idle, ssh_tree_idle = over_ssh(args.bin, args.landings, args.idle)
    idle = idle_cpu(args.bin, args.idle)
    print("headless event latency: median %.3f s, p95 %.3f s over %d landings" % (
        statistics.median(head), percentile(head, 0.95), len(head)))
    if scr:
        print("screen latency:         median %.3f s, p95 %.3f s over %d landings" % (
            statistics.median(scr), percentile(scr, 0.95), len(scr)))
    if ssh:
        print("ssh event latency:      median %.3f s, p95 %.3f s over %d landings (1 s poll)" % (
            statistics.median(ssh), percentile(ssh, 0.95), len(ssh)))
        print("idle ssh watch CPU:     %.3f%% of one core over %.0f s (dumpview only)" % (100 * ssh_idle, args.idle))
        print("                        %.3f%% with its ssh processes (a listing per poll, the master)" % (
            100 * ssh_tree_idle))
    print("idle watch CPU:         %.3f%% of one core over %.0f s" % (100 * idle, args.idle))
    print("RESULT local_event_p50_s=%.3f local_event_p95_s=%.3f local_screen_p50_s=%.3f "
          "local_screen_p95_s=%.3f ssh_event_p50_s=%.3f ssh_event_p95_s=%.3f ssh_idle_cpu_pct=%.3f ssh_idle_cpu_with_ssh_pct=%.3f idle_cpu_pct=%.3f" % (
              statistics.median(head), percentile(head, 0.95),
              statistics.median(scr) if scr else float("nan"),
              percentile(scr, 0.95) if scr else float("nan"),
              statistics.median(ssh) if ssh else float("nan"),
              percentile(ssh, 0.95) if ssh else float("nan"), 100 * ssh_idle, 100 * ssh_tree_idle,
              100 * idle))


if __name__ == "__main__":
    main()
