#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Right names or none: every function name the agent gives to a location in node (99 MB,
# .symtab of 2.6 MB and 7.5 MB of names: over the symbol cache, so read through an index with
# names from the file; DWARF for libuv only) and in libcrypto.so.3 (stripped: .dynsym) is
# checked against binutils: nm's symbol covering the address (its size; the nearest below for
# a symbol without size) or addr2line -f. 0 wrong; and node must be named at all (at least 20
# locations: the table used to be refused over the cache's size, every frame "[node]").
# Workloads: node hashing, JSON and process.hrtime (libuv); openssl speed sha256/aes. A mapping
# whose build-id is not the file's at its path (a process outside a chroot the test runs in) is
# not judged against that file.
set -u
agent=$EP_BUILD/edgeprof-agent
[ -x "$agent" ] || { echo "agent not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
for c in node openssl nm addr2line go; do
	command -v $c >/dev/null || { echo "$c not installed (tools/deps/bpf.list)"; exit 77; }
done
"$agent" --help 2>&1 | grep -q -- "--sampler" || { echo "agent without --sampler"; exit 77; }
tmp=$(mktemp -d)
trap 'wait 2>/dev/null; rm -rf "$tmp"' EXIT
cat >"$tmp/hot.js" <<'JS'
const crypto = require('crypto');
let t = 0, h = 0, end = Date.now() + 3000;
while (Date.now() < end) {
  for (let i = 0; i < 1000; i++) t += Number(process.hrtime.bigint() & 1n);
  h ^= crypto.createHash('sha256').update('x'.repeat(4096)).digest()[0];
  JSON.parse(JSON.stringify({a: [1, 2, 3], b: 'x'.repeat(100)}));
}
console.log(t, h);
JS
mkdir -p "$tmp/out"
"$agent" --once --seconds 8 --sampler bpf --output-dir "$tmp/out" --registry "$tmp/reg" \
	>"$tmp/agent.log" 2>&1 &
apid=$!
sleep 1.5
node "$tmp/hot.js" >/dev/null &
openssl speed -seconds 3 sha256 aes-128-cbc >/dev/null 2>&1 &
wait %2 %3
wait "$apid" || { echo "agent failed: $(tail -3 "$tmp/agent.log")"; exit 1; }
prof=$(find "$tmp/out" -name '*-cpu-*.pb.gz' | head -1)
[ -n "$prof" ] || { echo "no profile"; exit 1; }
go tool pprof -raw -symbolize=none "$prof" >"$tmp/raw" 2>/dev/null || { echo "pprof -raw"; exit 1; }
node_bin=$(readlink -f "$(command -v node)")
# Debian's node is a small program over libnode.so, where its code is (NodeSource's is one file)
libnode=$(ldd "$node_bin" | awk '/libnode/ { print $3 }')
[ -n "$libnode" ] && node_bin=$(readlink -f "$libnode")
crypto=$(ldd "$(command -v openssl)" | awk '/libcrypto/ { print $3 }')
python3 - "$tmp/raw" "$node_bin" "$(readlink -f "$crypto")" <<'PY'
import bisect, re, subprocess, sys
raw, files = open(sys.argv[1]).read(), sys.argv[2:]

def loads(path):  # (offset, vaddr, filesz) of the PT_LOADs
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout
    return [(int(m[1], 16), int(m[2], 16), int(m[3], 16))
            for m in re.finditer(r"^\s+LOAD\s+(0x\S+)\s+(0x\S+)\s+0x\S+\s+(0x\S+)", out, re.M)]

def nm_syms(path):  # sorted (addr, size, name) of defined functions, .symtab else .dynsym
    for opt in ([], ["-D"]):
        out = subprocess.run(["nm", "-n", "-S", "--defined-only"] + opt + [path],
                             capture_output=True, text=True).stdout
        syms = []
        for l in out.splitlines():
            p = l.split()
            if len(p) == 4 and p[2] in "TtWwi":
                syms.append((int(p[0], 16), int(p[1], 16), p[3].split("@")[0]))
            elif len(p) == 3 and p[1] in "TtWwi":
                syms.append((int(p[0], 16), 0, p[2].split("@")[0]))
        if syms:
            return syms
    return []

def truth(syms, addrs, va):  # names nm gives va: every symbol covering it, or the nearest unsized
    i = bisect.bisect_right(addrs, va)
    ok = {n for a, s, n in syms[max(0, i - 64):i] if s and a <= va < a + s}
    if i and syms[i - 1][1] == 0:
        ok.add(syms[i - 1][2])
    return ok

def build_id(path):
    out = subprocess.run(["readelf", "-nW", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m[1] if m else ""

# A mapping of another file at the same path (a process outside this chroot: the agent samples
# the whole machine and reads each process's own file, /proc/PID/root) is not this file's.
ids = {path: build_id(path) for path in files}
maps = {}
sec = raw.split("Mappings")[1] if "Mappings" in raw else ""
for m in re.finditer(r"^(\d+): (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S+)(?: ([0-9a-f]{16,}))?", sec, re.M):
    if m[5] in ids and m[6] and ids[m[5]] and m[6] != ids[m[5]]:
        print(f"{m[5]}: mapping {m[1]} is another file's (build-id {m[6]}): not judged")
        continue
    maps[m[1]] = (int(m[2], 16), int(m[4], 16), m[5])
locs = re.findall(r"^\s+\d+: (0x[0-9a-f]+) M=(\d+)[ \t]*(\S*)", raw.split("Mappings")[0], re.M)
bad = 0
for path in files:
    segs, syms = loads(path), nm_syms(path)
    addrs = [a for a, _, _ in syms]
    named = unnamed = 0
    todo = []
    for addr, mid, name in locs:
        if mid not in maps or maps[mid][2] != path:
            continue
        start, off0, _ = maps[mid]
        off = int(addr, 16) - start + off0
        va = next((off - o + v for o, v, sz in segs if o <= off < o + sz), None)
        if va is None:
            continue
        if not name or name.startswith("s="):  # no function
            unnamed += 1
            continue
        named += 1
        if name not in truth(syms, addrs, va):
            todo.append((va, name))
    # the rest against addr2line -f (DWARF's name where it covers the address)
    if todo:
        out = subprocess.run(["addr2line", "-f", "-e", path] + ["%#x" % v for v, _ in todo],
                             capture_output=True, text=True).stdout.splitlines()[0::2]
        for (va, name), a2l in zip(todo, out):
            if a2l != name:
                bad += 1
                print(f"WRONG {path} {va:#x}: agent {name}, nm {sorted(truth(syms, addrs, va))}, addr2line {a2l}")
    print(f"{path}: e.g. {[n for _, m, n in locs if m in maps and maps[m][2] == path][:4]}")
    print(f"{path}: {named} locations named, {unnamed} not, {len(todo)} checked by addr2line")
    if path == files[0] and named < 20:
        print(f"FAIL: node named at only {named} locations"); bad += 1
    if path != files[0] and named + unnamed == 0:
        print(f"FAIL: no locations in {path}"); bad += 1
print("FAIL" if bad else "PASS", f"{bad} wrong")
sys.exit(1 if bad else 0)
PY
