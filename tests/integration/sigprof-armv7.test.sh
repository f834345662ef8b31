#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libedgeprof.so (gateway-armv7 build) under qemu-arm on code built the way firmware is built:
# own C (tests/bench/stacks-work.c) compiled by Debian's arm-linux-gnueabihf-gcc -O2 (Thumb-2)
# WITHOUT -funwind-tables and stripped, so no .ARM.exidx entry covers it; and Debian's armhf
# xz -9 (liblzma has no unwind tables either). Frames are found by reading the code
# (elf/armframe.h):
#  - own C: >= 90 % of samples reach main, >= 99 % of the call edges of samples labelled
#    unwind=inferred are calls (the call instruction before each return address calls the
#    callee's function, read from the unstripped copy), >= 90 % labelled inferred;
#  - the same source with -funwind-tables: >= 98 % reach main (leaves in libc's memcpy, qsort:
#    CANTUNWIND there);
#  - xz -9: >= 90 % reach __libc_start_main;
#  - the control: the same stripped program walked with EDGEPROF_UNWIND=fp (pc and lr only,
#    as before) reaches main in < 10 % and has no sample labelled inferred.
set -u
board=gateway-armv7
t=arm-linux-gnueabihf
command -v qemu-arm >/dev/null && command -v $t-gcc >/dev/null &&
	[ -d "$EP_TOP/build/sysroot-armhf" ] || { echo "no qemu-arm, $t-gcc or armhf sysroot: make test-arm runs this"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
make -s -C "$EP_TOP" BOARD=$board "build/$board/libedgeprof.so" >/dev/null 2>&1 ||
	{ echo "gateway-armv7 libedgeprof.so does not build"; exit 1; }
lib=$EP_TOP/build/$board/libedgeprof.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

EP_TOP=$EP_TOP LIB=$lib /usr/bin/python3 - "$tmp" <<'PY'
import importlib.util, os, subprocess, sys
top, tmp = os.environ["EP_TOP"], sys.argv[1]
spec = importlib.util.spec_from_file_location("sb", f"{top}/tests/bench/stacks-bench.py")
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)
root = sb.cross_root(top, "armhf")  # Debian's armhf xz, liblzma (apt-get download, cached)
progs = sb.armv7_programs(tmp, root, 1.0)  # ~3 s of CPU each: startup samples few
ok = True

def run(name, env=()):
    argv, names = progs[name]
    out = os.path.join(tmp, f"{name}.pb.gz")
    t = "arm-linux-gnueabihf"
    libs = f"{root}/usr/lib/{t}:{root}/lib/{t}:{top}/build/sysroot-armhf/usr/lib/{t}"
    cmd = ["qemu-arm", "-L", f"/usr/{t}", "-E", f"LD_LIBRARY_PATH={libs}",
           "-E", f"LD_PRELOAD={os.environ['LIB']}", "-E", f"EDGEPROF_OUTPUT={out}",
           "-E", "EDGEPROF_HZ=999"] + [x for e in env for x in ("-E", e)] + argv
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, timeout=600)
    return sb.judge_armv7(sb.pprof_samples(out, main_thread=True), names, show=3)

def check(what, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok &= bool(cond)

r = run("own-notables")
print(f"own C without tables: {r['n']} samples, {r['main']:.1f} % reach main, "
      f"{r['inferred']:.1f} % inferred, {r['edges']} edges {r['edges_ok']:.1f} % calls")
check("own C without tables: >= 100 samples", r["n"] >= 100)
check("own C without tables: >= 90 % reach main", r["main"] >= 90)
check("own C without tables: >= 90 % labelled unwind=inferred", r["inferred"] >= 90)
check("own C without tables: >= 99 % of inferred edges are calls", r["edges_ok"] >= 99)
c = run("own-notables", ["EDGEPROF_UNWIND=fp"])
print(f"control (fp: pc and lr): {c['main']:.1f} % reach main, {c['inferred']:.1f} % inferred")
check("control: < 10 % reach main, none inferred", c["main"] < 10 and c["inferred"] == 0)
t = run("own-tables")
print(f"own C with -funwind-tables: {t['n']} samples, {t['main']:.1f} % reach main")
check("own C with tables: >= 98 % reach main", t["main"] >= 98)
x = run("xz")
print(f"Debian xz -9: {x['n']} samples, {x['main']:.1f} % reach __libc_start_main")
check("xz -9: >= 90 % reach __libc_start_main", x["main"] >= 90 and x["n"] >= 50)
sys.exit(0 if ok else 1)
PY
