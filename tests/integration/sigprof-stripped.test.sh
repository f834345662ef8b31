#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libedgeprof.so on Debian's own stripped binaries without frame pointers (xz -9 -T1: xz,
# liblzma, libc), as a user would try it:
#  - whole stacks: >= 95% of samples reach __libc_start_main through liblzma (every frame is
#    unwound by .eh_frame; frame pointers alone get 2-3 frames there);
#  - names without debug files: exported functions of the stripped liblzma come from its
#    .dynsym (lzma_code, as perf shows), internal ones stay addresses in a mapping that carries
#    liblzma's build-id, for a desktop pprof to name from a debug file.
set -u
lib=$EP_BUILD/libedgeprof.so
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
command -v xz >/dev/null || { echo "xz not installed"; exit 77; }
lzma=$(ldd "$(command -v xz)" | awk '/liblzma/ {print $3}')
[ -n "$lzma" ] || { echo "xz is not linked with liblzma here"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
preload=$lib
if ldd "$lib" | grep -q libasan; then
	preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	export ASAN_OPTIONS=detect_leaks=0
fi
head -c 3000000 /dev/urandom >"$tmp/random"
timeout 300 env LD_PRELOAD="$preload" EDGEPROF_OUTPUT="$tmp/xz.pb.gz" EDGEPROF_HZ=999 \
	xz -9 -T1 -c "$tmp/random" >/dev/null || exit 1
want_id=$(readelf -n "$lzma" | awk '/Build ID/ {print $3}')

PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/xz.pb.gz" "$want_id" <<'PY'
import subprocess
import sys
import pprof_traces as pt
path, want_id = sys.argv[1], sys.argv[2]
ss = pt.samples(path, index="samples")
n = sum(s.value for s in ss)
whole = sum(s.value for s in ss if "__libc_start_main" in s.frames)
lzma = sum(s.value for s in ss if "lzma_code" in s.frames)
print(f"{n} samples: {100.0 * whole / max(n, 1):.1f}% reach __libc_start_main, "
      f"{100.0 * lzma / max(n, 1):.1f}% name lzma_code")
ok = n >= 100 and whole >= 0.95 * n and lzma >= 0.5 * n
raw = subprocess.run(["go", "tool", "pprof", "-raw", "-symbolize=none", path],
                     capture_output=True, text=True, check=True).stdout
maps = [l for l in raw.split("Mappings")[1].splitlines() if "liblzma" in l]
print("liblzma mapping:", maps[0] if maps else None)
ok &= bool(maps) and want_id in maps[0]
lzma_id = maps[0].split(":")[0] if maps else "?"
unnamed = [l for l in raw.split("Locations")[1].split("Mappings")[0].splitlines()
           if f" M={lzma_id} " in l + " " and l.rstrip().endswith(f"M={lzma_id}")]
print(f"liblzma locations without a name (left to desktop symbolization): {len(unnamed)}")
ok &= len(unnamed) > 0
sys.exit(0 if ok else 1)
PY
