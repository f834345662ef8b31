#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Python and Lua frames in libedgeprof.so on gateway-armv7 (32-bit ARM, Thumb-2), under qemu-arm
# with Debian's armhf interpreters (issue 37 item 5): tests/workloads/pysplit.py on python3.11
# and luasplit.lua on lua5.4 and lua5.1 (their handlers take known CPU shares, which the
# scripts print), with the board's libedgeprof.so preloaded. Debian's armhf binaries have no unwind tables:
# the interpreters' loops are found and walked by reading their code (agent/lib/luaarm.c,
# elf/armframe.h's armframe__body), their frames by the ILP32 layouts.
#  - both: >= 95 % of the samples under the script's run() name a handler (Python: >= 70 % of
#    all samples, the rest is python's start-up and imports, which qemu stretches; Lua >= 85 %),
#    shares within 5 pp of the script's own accounting, output and exit status unchanged; the
#    layouts hold (Python: no mismatch, its thread-state key where the table says,
#    tss_searches=0; Lua: mismatches < 1 % of its samples), frames named (none unreadable).
#  - a control: EDGEPROF_PYTHON=0 / EDGEPROF_LUA=0 (the native walk alone) name no handler.
# qemu's figures are an emulator's: the shares and the named share hold, the time does not.
# Run by `make test-arm` (its ARM_HOST_TESTS match "sigprof-armv7").
set -u
command -v qemu-arm >/dev/null && [ -d "$EP_TOP/build/sysroot-armhf" ] ||
	{ echo "no qemu-arm or armhf sysroot: make test-arm runs this"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
make -s -C "$EP_TOP" BOARD=gateway-armv7 build/gateway-armv7/libedgeprof.so >/dev/null 2>&1 ||
	{ echo "gateway-armv7 libedgeprof.so does not build"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

EP_TOP=$EP_TOP /usr/bin/python3 - "$tmp" <<'PY'
import importlib.util, os, re, subprocess, sys
top, tmp = os.environ["EP_TOP"], sys.argv[1]
sys.path.insert(0, f"{top}/tests/workloads")
import pprof_traces as pt
spec = importlib.util.spec_from_file_location("sb", f"{top}/tests/bench/stacks-bench.py")
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)
T, LIB = "arm-linux-gnueabihf", f"{top}/build/gateway-armv7/libedgeprof.so"
ok = True

def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)

def lua_root(pkg="lua5.4"):
    """Debian's armhf pkg (apt-get download, cached beside the bench's .debs)."""
    root = os.path.join(top, "build", f"{pkg.replace('lua5.4', 'lua')}-armhf")
    if not os.path.exists(os.path.join(root, ".complete")):
        os.makedirs(root, exist_ok=True)
        subprocess.run(["apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root",
                        f"{pkg}:armhf"], cwd=root, check=True)
        for d in os.listdir(root):
            if d.endswith(".deb"):
                subprocess.run(["dpkg", "-x", os.path.join(root, d), root], check=True)
        open(os.path.join(root, ".complete"), "w").close()
    return root

def run(argv, tag, env=()):
    root = sb.cross_root(top, "armhf")  # python3.11, libreadline8, libtinfo6 for armhf
    out = os.path.join(tmp, f"{tag}.pb.gz")
    libs = ":".join([f"{root}/usr/lib/{T}", f"{root}/lib/{T}",
                     f"{top}/build/sysroot-armhf/usr/lib/{T}"])
    # at nice -10 (CI runs as root): load biased the shares (6.1 pp off at load 7, 2.2 quiet)
    base = ["nice", "-n", "-10", "qemu-arm", "-L", f"/usr/{T}", "-E",
            f"LD_LIBRARY_PATH={libs}", "-E", "PYTHONHOME=/usr"]
    plain = subprocess.run(base + argv, capture_output=True, text=True, timeout=600)
    prof = subprocess.run(base + ["-E", f"LD_PRELOAD={LIB}", "-E", f"EDGEPROF_OUTPUT={out}",
                                  "-E", "EDGEPROF_HZ=199"] +
                          [x for e in env for x in ("-E", e)] + argv,
                          capture_output=True, text=True, timeout=600)
    first = lambda s: [l.split()[0] for l in s.splitlines() if l.split()]  # noqa: E731
    check(f"{tag}: exit status {prof.returncode} and output lines as without the library",
          prof.returncode == plain.returncode == 0 and first(prof.stdout) == first(plain.stdout))
    truth = {l.split()[0]: float(l.split()[1]) for l in prof.stdout.splitlines()
             if len(l.split()) == 2}
    return out, truth

def judge(tag, out, truth, handler, in_run_frame):
    """handler(frames): the handler a sample is in, or None. Named share and share gap."""
    H = [h for h in truth if h != "sink"]
    ss = pt.samples(out)
    tot = sum(s.value for s in ss) or 1
    per = dict.fromkeys(H, 0.0)
    for s in ss:
        h = handler(s.frames)
        if h:
            per[h] += s.value
    named = 100 * sum(per.values()) / tot
    htot = sum(per.values()) or 1
    gap = max(abs(100 * per[h] / htot - truth[h]) for h in H)
    # the script's dispatcher running (past the interpreter's start-up and imports, which
    # qemu stretches): the samples under it
    under = [s for s in ss if any(in_run_frame(f) for f in s.frames)]
    utot = sum(s.value for s in under) or 1
    in_run = 100 * sum(s.value for s in under if handler(s.frames)) / utot
    print(f"{tag}: {len(ss)} stacks, handler named in {named:.1f} % of the samples, in "
          f"{in_run:.1f} % of those under run ({100 * utot / tot:.1f} %); shares " +
          " ".join(f"{h} {100 * per[h] / htot:.1f} (script {truth[h]:.1f})" for h in H) +
          f"; max gap {gap:.1f} pp")
    hdr = pt.header(out)
    for l in hdr:
        if re.match(r"edgeprof (python|lua|selfread|unwind)|(python|lua) names", l):
            print("  " + l.strip())
    return named, in_run, gap, " ".join(hdr)

work = f"{top}/tests/workloads"
# 6 s of the process's CPU after start-up (pysplit's "cpu" clock), not of wall time: at load 7
# a wall-time run got 1.6 s of CPU, ~1 s of it under run() (~200 samples), shares 19.5 pp off
# (a CI run once failed at 15.2); with the CPU clock ~1,100 samples under run() at any load, a
# share's standard error at most ~1.5 pp, and the 5 pp bound over 3 of them. Load still biases
# the shares: the same run at load 7 on the CPU clock was 6.1 pp off (2.2 pp unloaded: sigprof-armv7-python313).
py = [os.path.join(sb.cross_root(top, "armhf"), "usr/bin/python3.11"), f"{work}/pysplit.py",
      "6", "0", "cpu"]

def py_handler(frames):
    return next(({"inner": "outer"}.get(f, f) for f in frames
                 if f in ("fib", "work_dict", "outer", "inner")), None)

src = open(f"{work}/luasplit.lua").read().splitlines()
run_line = str(next(n + 1 for n, l in enumerate(src) if re.match(r"local function run\b", l)))
first = {}
for n, l in enumerate(src):
    m = re.match(r"local function (\w+)", l)
    if m:
        first[str(n + 1)] = {"fibs": "fib", "inner": "outer"}.get(m.group(1), m.group(1))

def lua_handler(frames):
    for f in frames:
        m = re.match(r"function <.*luasplit\.lua:(\d+)>$", f)
        if m and first.get(m.group(1)) in ("fib", "work_str", "outer"):
            return first[m.group(1)]
    return None

lua_run = lambda f: f.startswith("function <") and f.endswith(":" + run_line + ">")  # noqa: E731
lua = [os.path.join(lua_root(), "usr/bin/lua5.4"), f"{work}/luasplit.lua", "6"]

out, truth = run(py, "python-armv7")
named, in_run, gap, hdr = judge("python-armv7", out, truth, py_handler, lambda f: f == "run")
check("python-armv7: >= 95 % of the samples under run name a handler, >= 70 % of all",
      in_run >= 95 and named >= 70)
check("python-armv7: shares within 5 pp of the script's", gap <= 5)
check("python-armv7: its layout held (mismatch=0 tss_searches=0), names read (unreadable=0)",
      re.search(r"python: version=3\.11 spliced=1 .*mismatch=0 tss_searches=0 ", hdr) and
      "unreadable=0 " in hdr)

out, truth = run(lua, "lua-armv7")
named, in_run, gap, hdr = judge("lua-armv7", out, truth, lua_handler, lua_run)
check("lua-armv7: >= 95 % of the samples under run name a handler, >= 85 % of all",
      in_run >= 95 and named >= 85)
check("lua-armv7: shares within 5 pp of the script's", gap <= 5)
m = re.search(r"lua: version=5\.4\.4 spliced=1 .* samples=(\d+) .*mismatch=(\d+) ", hdr)
check("lua-armv7: its layout held (mismatches < 1 % of the spliced samples: a torn chain, a "
      "leaf in the 6 bytes past luaV_execute), names read (unreadable=0)",
      m and int(m.group(2)) * 100 < int(m.group(1)) and "unreadable=0 " in hdr)

# Lua 5.1 (Debian's armhf lua5.1: the VM in the program, no unwind tables): its ILP32 layouts,
# its luaV_execute found by the probe's walks read from the code (agent/lib/lua51frames.c)
lua51 = [os.path.join(lua_root("lua5.1"), "usr/bin/lua5.1"), f"{work}/luasplit.lua", "6"]
out, truth = run(lua51, "lua51-armv7")
named, in_run, gap, hdr = judge("lua51-armv7", out, truth, lua_handler, lua_run)
check("lua51-armv7: >= 95 % of the samples under run name a handler, >= 85 % of all",
      in_run >= 95 and named >= 85)
check("lua51-armv7: shares within 5 pp of the script's", gap <= 5)
m = re.search(r"lua: version=5\.1\.5 spliced=1 .* samples=(\d+) .*mismatch=(\d+) ", hdr)
check("lua51-armv7: 5.1 spliced, mismatches < 1 % of its samples, names read (unreadable=0)",
      m and int(m.group(2)) * 100 < int(m.group(1)) and "unreadable=0 " in hdr)

# a coroutine (tests/workloads/luaco.lua, as sigprof-lua checks it on the host): its frames
# (leaf <- gen) above lua_resume, the resumer's (driver) below, in >= 90 % of the samples
# under driver (the rest: the 64 samples a thread waits between two scans for states, when the
# first found only the main state)
co = f"{work}/luaco.lua"
out = os.path.join(tmp, "co.pb.gz")
root = sb.cross_root(top, "armhf")
libs = f"{root}/usr/lib/{T}:{root}/lib/{T}:{top}/build/sysroot-armhf/usr/lib/{T}"
res = subprocess.run(["qemu-arm", "-L", f"/usr/{T}", "-E", f"LD_LIBRARY_PATH={libs}", "-E",
                      f"LD_PRELOAD={LIB}", "-E", f"EDGEPROF_OUTPUT={out}", "-E", "EDGEPROF_HZ=199",
                      lua[0], co, "4"], capture_output=True, text=True, timeout=600)
check("lua-armv7 coroutine: output 'true true'", res.stdout.split() == ["true", "true"])
firstco = {re.match(r"local function (\w+)", l).group(1): n + 1
           for n, l in enumerate(open(co).read().splitlines())
           if re.match(r"local function (\w+)", l)}
fn = {f"function <{co}:{v}>": k for k, v in firstco.items()}
under = whole = 0.0
for s in pt.samples(out):
    names = [fn.get(f, f) for f in s.frames]
    if "driver" not in names:
        continue
    under += s.value
    i = names.index("driver")
    script = [n for n in names[:i] if n in firstco]
    if script[-2:] == ["leaf", "gen"] and "lua_resume" in names[names.index("gen"):i]:
        whole += s.value
print(f"lua-armv7 coroutine: under driver {under / 1e9:.2f} s, leaf <- gen <- lua_resume <- "
      f"driver {100 * whole / max(under, 1):.1f} %")
for l in pt.header(out):
    if re.match(r"edgeprof lua", l):
        print("  " + l.strip())
check("lua-armv7 coroutine: >= 90 % of the samples under driver whole",
      under > 0.5e9 and whole >= 0.9 * under)

# the controls: the native walk alone names no handler
for tag, argv, env, handler in (("python-armv7-off", py[:2] + ["2"], "EDGEPROF_PYTHON=0",
                                 py_handler),
                                ("lua-armv7-off", lua[:2] + ["2"], "EDGEPROF_LUA=0",
                                 lua_handler)):
    out, truth = run(argv, tag, env=(env,))
    named, _, _, _ = judge(tag, out, truth, handler, lambda f: False)
    check(f"{tag}: {env} names no handler", named == 0)
sys.exit(0 if ok else 1)
PY
