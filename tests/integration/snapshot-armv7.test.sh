#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Exact frames from debug files, off the device (issue 36 item 3), under qemu-arm: own C
# (tests/bench/stacks-work.c) built by Debian's arm-linux-gnueabihf-gcc -O2 (Thumb-2) WITHOUT
# -funwind-tables, with -g; the debug file split off by objcopy --only-keep-debug and the binary
# stripped; run with the gateway-armv7 libedgeprof.so and every sample's snapshot on
# (EDGEPROF_SNAPSHOT_EVERY=1, the default 4 KiB of stack), against Debian's armhf libc6 (its
# libc6-dbg debug files: .debug_frame, zlib-compressed). The debug files are uploaded to a real
# collector with `edgeprof debuginfo upload`, then the profile; the stored profile is read back
# with `edgeprof query` and go tool pprof.
#  - >= 98 % of the main thread's samples labelled unwind=exact with the chain (from main to
#    the leaf) of a run of the same source built with -funwind-tables (the truth: its stacks
#    come from .ARM.exidx); the device's own chains of the same samples, judged alike, printed
#    as the control;
#  - the stored profile holds no snapshot label, and its comment counts what happened;
#  - a profile uploaded before its debug files: nothing exact, snapshots stripped, counted;
#  - a corrupted snapshot: counted bad_snapshot, the sample kept with the device's chain.
# Prints the size of a snapshot in the upload (gzip, against the same run without snapshots).
. "$EP_TOP/tests/lib/collector-lib.sh"
board=gateway-armv7
t=arm-linux-gnueabihf
command -v qemu-arm >/dev/null && command -v $t-gcc >/dev/null &&
	[ -d "$EP_TOP/build/sysroot-armhf" ] || { echo "no qemu-arm, $t-gcc or armhf sysroot: make test-arm runs this"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
make -s -C "$EP_TOP" BOARD=$board "build/$board/libedgeprof.so" >/dev/null 2>&1 ||
	fail "gateway-armv7 libedgeprof.so does not build"
export GOCACHE=$T/gocache HOME=$T PPROF_BINARY_PATH=/nonexistent
make_pki
start_collector --max-debuginfo 16M
export EDGEPROF_COLLECTOR=https://localhost:$TLS_PORT EDGEPROF_TLS_CA=$T/pki/ca.crt \
	EDGEPROF_TLS_CERT=$T/pki/op.crt EDGEPROF_TLS_KEY=$T/pki/op.key

EP_TOP=$EP_TOP EP=$EP LIB=$EP_TOP/build/$board/libedgeprof.so /usr/bin/python3 - "$T" <<'PY' ||
import glob, importlib.util, os, re, subprocess, sys
top, tmp, ep = os.environ["EP_TOP"], sys.argv[1], os.environ["EP"]
spec = importlib.util.spec_from_file_location("sb", f"{top}/tests/bench/stacks-bench.py")
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)
t = "arm-linux-gnueabihf"
ok = True


def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)


def libc_root():
    """Debian's armhf libc6 and libc6-dbg, downloaded and unpacked (never installed), cached."""
    root = os.path.join(top, "build", "snap-armhf")
    if not os.path.exists(os.path.join(root, ".complete")):
        debs = os.path.join(root, "debs")
        os.makedirs(debs, exist_ok=True)
        subprocess.run(["apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root",
                        "libc6:armhf", "libc6-dbg:armhf"], cwd=debs, check=True)
        for d in os.listdir(debs):
            subprocess.run(["dpkg", "-x", os.path.join(debs, d), root], check=True)
        open(os.path.join(root, ".complete"), "w").close()
    return root


def build(name, flags):
    full, run, dbg = (os.path.join(tmp, name + x) for x in (".full", "", ".debug"))
    subprocess.run([f"{t}-gcc", "-O2", "-g"] + flags +
                   ["-o", full, f"{top}/tests/bench/stacks-work.c"], check=True)
    subprocess.run([f"{t}-objcopy", "--only-keep-debug", full, dbg], check=True)
    subprocess.run([f"{t}-strip", "-o", run, full], check=True)
    return run, full, dbg


def run(binary, out, env=(), n=1500):
    cmd = ["qemu-arm", "-L", root, "-E",
           f"LD_LIBRARY_PATH={root}/lib/{t}:{top}/build/sysroot-armhf/usr/lib/{t}:/usr/{t}/lib",
           "-E", f"LD_PRELOAD={os.environ['LIB']}", "-E", f"EDGEPROF_OUTPUT={out}",
           "-E", "EDGEPROF_HZ=999"] + [x for e in env for x in ("-E", e)] + [binary, str(n)]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, timeout=600)


def curl(*args):
    return subprocess.run(["curl", "-sS", "--max-time", "60", "--cacert", f"{tmp}/pki/ca.crt",
                           "--cert", f"{tmp}/pki/op.crt", "--key", f"{tmp}/pki/op.key"] +
                          list(args), capture_output=True, text=True).stdout


def store(profile, service):
    url = os.environ["EDGEPROF_COLLECTOR"]
    ans = curl("--data-binary", f"@{profile}", f"{url}/api/0/profiles?service={service}&type=cpu")
    check(f"{service}: stored", '"code":200' in ans)
    out = os.path.join(tmp, service + ".stored.pb.gz")
    subprocess.run([ep, "query", service, "-o", out], check=True, capture_output=True)
    return out


def raw(path):
    return subprocess.run(["go", "tool", "pprof", "-raw", "-symbolize=none", path],
                          capture_output=True, text=True, check=True).stdout


def counts(path):
    m = re.search(r"edgeprof snapshots \(unwound at the collector\): (.*)", raw(path))
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))} if m else {}


def key(ch):
    """The chain from main to the leaf (what both builds share above it: libc's start code,
    cut at _start, which has no CFI), or the whole chain of a sample outside main (the loader,
    the library's start)."""
    return ch[ch.index("main"):] if "main" in ch else ch


def pairs_of(ch):
    return {(ch[i - 1], ch[i]) for i in range(1, len(ch))}


def edges_right(fr, known):
    """Whether every caller -> callee edge of frames fr (leaf first, named paths), from main
    down (all of them outside main), is one the truth run saw, or else confirmed by the code:
    the instruction before the caller's return address calls the callee's function
    (stacks_elf.edge_ok). The truth run cannot have sampled every rare callee or depth of
    qsort's recursion, nor the loader's lazy binding alike. An edge whose callee no symbol
    names (stripped ld.so, libc's static functions) cannot be checked in the code: as in
    tests/bench/stacks-bench.py's judge_armv7, it is not judged (counted apart)."""
    global unjudged
    names = [sb.stacks_elf.function(p, o if i == 0 else o - 1) for i, (p, o) in enumerate(fr)]
    top = names.index("main") if "main" in names else len(names) - 1
    for i in range(1, top + 1):
        if (names[i], names[i - 1]) in known:
            continue
        callee = sb.stacks_elf.elf(fr[i - 1][0])
        va = callee.vaddr(fr[i - 1][1]) if callee else None
        if va is None or callee.start(va & ~1) is None:
            unjudged += 1
            continue
        if not sb.stacks_elf.edge_ok((fr[i][0], fr[i][1] + 1), fr[i - 1]):
            return False
    return True


unjudged = 0


def judge(samples, names, truth, label, show=3):
    """(samples, % whose chain (key) equals a truth chain, % whose every edge is right
    (edges_right) and whose leaf the truth has (or is confirmed likewise)): a sample counts
    only when labelled (unwind=exact; all of the device's count)."""
    n = same = edges = 0
    bad = sb.collections.Counter()
    known = set().union(*(pairs_of(c) for c in truth))
    leaves = {c[-1] for c in truth if c}
    for fr, labelled in samples:
        n += 1
        fr = [(names.get(p, p), o) for p, o in fr]
        ch = key(sb.chain_of(fr))
        same += bool(labelled and ch in truth)
        right = bool(labelled and edges_right(fr, known) and (len(ch) > 1 or ch[0] in leaves))
        edges += right
        if not right:
            bad[(labelled, ch)] += 1
    for (labelled, ch), k in bad.most_common(show):
        print(f"    {label}: {k} x {'labelled' if labelled else 'not labelled'}: "
              f"{' > '.join(ch)}")
    pct = lambda a: 100.0 * a / n if n else float("nan")  # noqa: E731
    return n, pct(same), pct(edges)


root = libc_root()
own, own_full, own_dbg = build("own-notables", [])
tab, tab_full, _ = build("own-tables", ["-funwind-tables"])
names = {own: own_full, tab: tab_full}
libc = f"{root}/lib/{t}/libc.so.6"
dbgs = [own_dbg, os.environ["LIB"] + ".debug"]  # the library's own frames (its drain thread)
for so in (libc, f"{root}/lib/{t}/ld-linux-armhf.so.3"):
    bid = subprocess.run(["file", "-L", so], capture_output=True, text=True).stdout
    bid = re.search(r"BuildID\[sha1\]=([0-9a-f]+)", bid).group(1)
    dbgs.append(f"{root}/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug")

# The truth: the -funwind-tables build's chains (from main), four times the work: its chains
# cover the rare callees and the depths of qsort's recursion the judged run may hit.
run(tab, f"{tmp}/truth.pb.gz", n=6000)
truth = {key(sb.chain_of([(names.get(p, p), o) for p, o in fr]))
         for fr in sb.pprof_frames(f"{tmp}/truth.pb.gz") if fr}
env = ["EDGEPROF_SNAPSHOT_EVERY=1", "EDGEPROF_SNAPSHOTS_MAX=65536"]
# the judged run as long as the truth's: ~1,100 samples, so that the 98 % bound is not one of
# chance (at 1,500 iterations, ~270 samples and 2-3 wrong ones a run, 6 failed it)
run(own, f"{tmp}/snap.pb.gz", env, n=6000)
run(own, f"{tmp}/plain.pb.gz")

# Before the debug files: the snapshots are stripped and counted, nothing is exact.
early = store(f"{tmp}/snap.pb.gz", "early")
c = counts(early)
check(f"before the debug files: none exact ({c})",
      c.get("snapshots", 0) > 0 and c.get("exact") == 0 and c.get("no_debug_file", 0) > 0)

subprocess.run([ep, "debuginfo", "upload"] + dbgs, check=True, stdout=subprocess.DEVNULL)
stored = store(f"{tmp}/snap.pb.gz", "app")
text = raw(stored)
check("the stored profile holds no snapshot", "snapshot:" not in text and "snapshot" not in
      [k for k in re.findall(r"(\w+):\[", text)])
c = app = counts(stored)
dev = sb.pprof_samples(f"{tmp}/snap.pb.gz", main_thread=True)
print(f"collector's count: {c}")
n, same, exact = judge(sb.pprof_samples(stored, main_thread=True, unwind="exact"), names, truth,
                       "exact")
print(f"    ({unjudged} edges of the collector's chains not in the truth run and not checkable "
      f"in the code: not judged)")
_, dsame, dedges = judge([(f, True) for f, _ in dev], names, truth, "device")
print(f"own C without tables, snapshots unwound at the collector: {n} samples (main thread), "
      f"labelled exact and right: {exact:.1f} % (every call edge from main is the "
      f"-funwind-tables build's or a call in the code), {same:.1f} % (the whole chain is one "
      f"of the -funwind-tables build's chains); the "
      f"device's own chains of the same samples: {dedges:.1f} % / {dsame:.1f} %")
check(">= 100 samples", n >= 100)
check(">= 98 % exact at the collector", exact >= 98)
metrics = curl(os.environ["EDGEPROF_COLLECTOR"] + "/metrics")
got = dict(re.findall(r"^edgeprof_collector_(stack_snapshots\w*) (\d+)$", metrics, re.M))
early_n = counts(early).get("snapshots", 0)
check(f"/metrics counts them ({got})",
      int(got.get("stack_snapshots_total", -1)) == early_n + c.get("snapshots", 0) and
      int(got.get("stack_snapshots_exact_total", -1)) == c.get("exact"))
check("every snapshot counted once", c.get("snapshots") == sum(
      v for k, v in c.items() if k in ("exact", "bad_snapshot", "no_debug_file", "no_fde",
                                       "left_snapshot", "unknown_reg", "bad_cfi", "too_deep",
                                       "over_limit")))

# A corrupted snapshot (its base64 cut short): counted, the sample kept as the device sent it.
body = subprocess.run(["gzip", "-dc", f"{tmp}/snap.pb.gz"], capture_output=True, check=True).stdout
m = re.search(rb"[A-Za-z0-9+/]{2000,}={0,2}", body)
at = m.start() + 100  # inside one snapshot's text (the match may start at a field's tag)
bad = body[:at] + b"!" + body[at + 1:]
with open(f"{tmp}/bad.pb", "wb") as f:
    f.write(bad)
c = counts(store(f"{tmp}/bad.pb", "bad"))
# (samples in the same state have the same snapshot: its text is one string for them all)
check(f"a corrupted snapshot: counted bad_snapshot ({c.get('bad_snapshot')}), the rest as before",
      c.get("bad_snapshot", 0) >= 1 and c.get("snapshots") == app.get("snapshots") and
      c.get("exact", 0) >= app.get("exact", 0) - c["bad_snapshot"])

# Size: what a snapshot adds to the upload (gzip), against the same work without them.
m = re.search(r"snapshots=(\d+)", raw(f"{tmp}/snap.pb.gz"))
k = int(m.group(1))
extra = os.path.getsize(f"{tmp}/snap.pb.gz") - os.path.getsize(f"{tmp}/plain.pb.gz")
print(f"size: {k} snapshots add {extra} bytes to the gzip upload: {extra / k:.0f} bytes each")
sys.exit(0 if ok else 1)
PY
	fail "see above"
echo "ok: snapshots unwound exactly at the collector"
