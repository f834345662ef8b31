#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Labels and desktop symbolization of libedgeprof.so profiles:
#  - split --labels wraps work_a/b/c in edgeprof_labels_push("fn", "a"|"b"|"c"): every sample
#    whose leaf is work_X carries fn=X, and nothing else carries those values wrongly;
#  - the stripped split's profile carries its build-id and file offsets, and `go tool pprof`
#    names work_a/b/c from the unstripped file put where the device's binary was (with only
#    the stripped file there, it cannot). Go's bundled pprof cannot match build-ids of local
#    files (cmd/pprof's BuildID() returns ""), so PPROF_BINARY_PATH lookups of a profile that
#    carries build-ids are refused by it ("build-id mismatch"); google/pprof matches them.
set -u
lib=$EP_BUILD/libedgeprof.so
w=$EP_BUILD/tests/workloads
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
preload=$lib
if ldd "$lib" | grep -q libasan; then
	preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	export ASAN_OPTIONS=detect_leaks=0
fi

timeout 600 env LD_PRELOAD="$preload" EDGEPROF_OUTPUT="$tmp/labels.pb.gz" EDGEPROF_HZ=997 \
	"$w/split" --threads 2 --rounds 800 --labels >/dev/null || exit 1
# the stripped binary, copied where its unstripped twin is not next to it
mkdir -p "$tmp/bin" "$tmp/sym"
cp "$w/split-stripped" "$tmp/bin/split"
cp "$w/split" "$tmp/sym/split"
timeout 600 env LD_PRELOAD="$preload" EDGEPROF_OUTPUT="$tmp/stripped.pb.gz" EDGEPROF_HZ=997 \
	"$tmp/bin/split" --rounds 300 >/dev/null || exit 1
want_id=$(readelf -n "$w/split" | awk '/Build ID/ {print $3}')

PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp" "$want_id" <<'PY'
import sys
import pprof_traces as pt
tmp, want_id = sys.argv[1], sys.argv[2]
ok = True
ss = pt.samples(f"{tmp}/labels.pb.gz")
for f in ("a", "b", "c"):
    mine = [s for s in ss if s.leaf == "work_" + f]
    right = sum(s.value for s in mine if s.labels.get("fn") == f)
    tot = sum(s.value for s in mine)
    print(f"work_{f}: {len(mine)} stacks, {100.0*right/max(tot,1):.2f}% of cpu labelled fn={f}")
    ok &= tot > 0 and right == tot
    wrong = [s for s in ss if s.labels.get("fn") == f and s.leaf.startswith("work_")
             and s.leaf != "work_" + f]
    ok &= not wrong
# stripped: build-id in the mapping; names only with the unstripped file
head = pt.header(f"{tmp}/stripped.pb.gz")
print("\n".join(head[:2]))
ok &= any(l.strip() == "Build ID: " + want_id for l in head)
env = {"PPROF_BINARY_PATH": f"{tmp}/nothing", "HOME": tmp}
without = pt.samples(f"{tmp}/stripped.pb.gz", symbolize=True, env=env)
print("with the stripped file:", sorted({s.leaf for s in without})[:6])
ok &= "work_a" not in {s.leaf for s in without}
import shutil
shutil.copy(f"{tmp}/sym/split", f"{tmp}/bin/split")  # the desktop has the unstripped file
with_file = pt.samples(f"{tmp}/stripped.pb.gz", symbolize=True, env=env)
names = {s.leaf for s in with_file}
print("with the unstripped file:", sorted(names)[:6])
ok &= {"work_a", "work_b", "work_c"} <= names
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
