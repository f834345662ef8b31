#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libedgeprof.so (gateway-arm64 build) under qemu-aarch64 on code built the way firmware built
# for size is: own C (tests/bench/stacks-work.c) compiled by Debian's aarch64-linux-gnu-gcc -O2
# -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables and stripped, so no
# .eh_frame row and no frame record covers it. Frames are found by reading the code
# (elf/a64frame.h):
#  - own C without tables: >= 90 % of samples reach main, >= 90 % labelled unwind=inferred,
#    >= 99 % of the call edges of inferred samples are calls (the call instruction before each
#    return address calls the callee's function, read from the unstripped copy), and >= 99 %
#    of the caller -> callee frames are ones a run of the same source built WITH tables saw;
#  - the same source with tables: >= 98 % reach main (the tables' path, unchanged);
#  - Debian's arm64 xz -9 (tables): >= 90 % reach __libc_start_main;
#  - the control: the stripped program walked with EDGEPROF_UNWIND=tables (tables and frame
#    pointers, no code read: as before) has < 10 % of its chains among the tables build's
#    (its x29 walk skips the program's frames) and no sample labelled inferred.
set -u
board=gateway-arm64
t=aarch64-linux-gnu
command -v qemu-aarch64 >/dev/null && command -v $t-gcc >/dev/null &&
	[ -d "$EP_TOP/build/sysroot-arm64" ] || { echo "no qemu-aarch64, $t-gcc or arm64 sysroot: make test-arm runs this"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
make -s -C "$EP_TOP" BOARD=$board "build/$board/libedgeprof.so" >/dev/null 2>&1 ||
	{ echo "gateway-arm64 libedgeprof.so does not build"; exit 1; }
lib=$EP_TOP/build/$board/libedgeprof.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

EP_TOP=$EP_TOP LIB=$lib /usr/bin/python3 - "$tmp" <<'PY'
import importlib.util, os, sys
top, tmp = os.environ["EP_TOP"], sys.argv[1]
spec = importlib.util.spec_from_file_location("sb", f"{top}/tests/bench/stacks-bench.py")
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)
root = sb.cross_root(top, "arm64")  # Debian's arm64 xz, liblzma (apt-get download, cached)
progs = sb.notables_programs(tmp, root, 1.0, "arm64")  # ~3 s of CPU each
ok = True

def run(name, env=()):
    argv, names = progs[name]
    out = os.path.join(tmp, f"{name}.pb.gz")
    t = "aarch64-linux-gnu"
    libs = f"{root}/usr/lib/{t}:{root}/lib/{t}:{top}/build/sysroot-arm64/usr/lib/{t}"
    cmd = ["qemu-aarch64", "-L", f"/usr/{t}", "-E", f"LD_LIBRARY_PATH={libs}",
           "-E", f"LD_PRELOAD={os.environ['LIB']}", "-E", f"EDGEPROF_OUTPUT={out}",
           "-E", "EDGEPROF_HZ=999"] + [x for e in env for x in ("-E", e)] + argv
    sb.subprocess.run(cmd, stdout=sb.subprocess.DEVNULL, check=True, timeout=600)
    return sb.judge_armv7(sb.pprof_samples(out, main_thread=True), names, show=3)

def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)

t = run("own-tables")
print(f"own C with tables: {t['n']} samples, {t['main']:.1f} % reach main")
check("own C with tables: >= 98 % reach main", t["main"] >= 98)
r = run("own-notables")
frames = sb.same_pairs(r["pairs"], set(t["pairs"]))
chains = sb.same_chains(r["chains"], set(t["chains"]))
print(f"own C without tables: {r['n']} samples, {r['main']:.1f} % reach main, "
      f"{r['inferred']:.1f} % inferred, {r['edges']} edges {r['edges_ok']:.1f} % calls, "
      f"{frames:.1f} % of frames and {chains:.1f} % of chains as with tables")
check("own C without tables: >= 100 samples", r["n"] >= 100)
check("own C without tables: >= 90 % reach main", r["main"] >= 90)
check("own C without tables: >= 90 % labelled unwind=inferred", r["inferred"] >= 90)
check("own C without tables: >= 99 % of inferred edges are calls", r["edges_ok"] >= 99)
check("own C without tables: >= 99 % of frames as with tables", frames >= 99)
c = run("own-notables", ["EDGEPROF_UNWIND=tables"])
cchains = sb.same_chains(c["chains"], set(t["chains"]))
print(f"control (tables and frame pointers only): {c['main']:.1f} % reach main, "
      f"{cchains:.1f} % of chains as with tables, {c['inferred']:.1f} % inferred")
check("control: < 10 % of chains as with tables, none inferred",
      cchains < 10 and c["inferred"] == 0)
x = run("xz")
print(f"Debian xz -9: {x['n']} samples, {x['main']:.1f} % reach __libc_start_main")
check("xz -9: >= 90 % reach __libc_start_main", x["main"] >= 90 and x["n"] >= 50)
sys.exit(0 if ok else 1)
PY
