#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every command the documents show runs: the ```sh blocks of README.md, agent/README.md,
# store/README.md and docs/transport.md are extracted and run in order, one bash session per
# document (set -e: each command must succeed), in a scratch directory with the build's
# binaries first on PATH and build/host-x86_64 pointing at this build. Documents that drift
# (a flag renamed, a file never made, an output that is not there) fail here.
#
# What is substituted, and only this (see subst() below):
#   - addresses: 0.0.0.0:8443, collector:8443, localhost:8443 -> loopback ports picked here;
#     0.0.0.0:4040, collector:4040, 127.0.0.1:8080 -> another loopback port;
#   - places: /var/lib/edgeprof/, /tmp/, /secure/ -> under the scratch directory;
#     --ring-size 1G -> 64M;
#   - durations: --seconds 10 -> 2; a daemon (edgeprof-agent without --once) gets
#     --round-seconds 2 --period-seconds 3 --jitter-percent 0 appended and runs under
#     `timeout -s INT 4` (one round, then it stops as on Ctrl-C), with the bundled workload
#     running beside it (an idle machine gives a system-wide sampler nothing to send);
#     edgeprof-collector runs in the background until the document's session ends;
#   - `edgeprof-collector ...` (the doc's "the flags above") -> a second collector's flags;
#   - inputs a document assumes but does not make: ./program is the bundled workload
#     (tests/workloads/split, 2 s), cpu.pb.gz / before.pb.gz / after.pb.gz are real profiles of
#     it recorded with libedgeprof.so here, $TOKEN is set.
# Not run here, each with its reason (NOT_RUN below): the make goals (CI runs them: .ci/run,
# and tools/fresh-root.sh runs `make demo` and `make test` on a bare root; here they would
# recurse into this suite; each goal is still checked to be a target of the Makefile or a
# board's _defconfig), tools/run-tests.sh lines (the suite itself, for the same reason), a
# collector with --clickhouse (it needs a ClickHouse server: collector-clickhouse starts one and
# runs the same flags), and commands that run on a remote device (scp/ssh; the install test runs
# the init script under BusyBox). A shell line matching none of these fails the test.
set -u
B=$EP_BUILD
for f in edgeprof edgeprof-agent edgeprof-collector libedgeprof.so tests/workloads/split; do
	[ -e "$B/$f" ] || { echo "$B/$f not built"; exit 77; }
done
command -v curl >/dev/null || { echo "no curl"; exit 77; }
command -v go >/dev/null || { echo "no go (go tool pprof)"; exit 77; }
if ldd "$B/libedgeprof.so" | grep libasan >/dev/null; then echo "sanitizer build: runs on the plain build"; exit 77; fi
tmp=$(mktemp -d)
cleanup() {
	for p in $(cat "$tmp"/*/pids 2>/dev/null); do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
free_port() { /usr/bin/python3 "$EP_TOP/tests/lib/free-port.py"; } # outside the ephemeral range
export GOCACHE=$tmp/go-cache HOME=$tmp GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local

# The inputs the documents take for granted, recorded for real once.
mkdir -p "$tmp/inputs"
printf '#!/bin/sh\nexec %s --seconds 2\n' "$B/tests/workloads/split" >"$tmp/inputs/program"
chmod +x "$tmp/inputs/program"
for f in cpu before after; do
	EDGEPROF_OUTPUT="$tmp/inputs/$f.pb.gz" EDGEPROF_HZ=499 LD_PRELOAD="$B/libedgeprof.so" \
		"$B/tests/workloads/split" --seconds 1 >/dev/null || fail "recording $f.pb.gz"
done

# The extractor: ```sh blocks, continuation lines joined, comments dropped, substituted.
gen() { # DOC WORKDIR -> bash session on stdout
	/usr/bin/python3 - "$1" "$2" <<'PY'
import os, re, shlex, sys
doc, w = sys.argv[1], sys.argv[2]
name = os.path.relpath(doc, os.environ["EP_TOP"])
NOT_RUN = [
    (r"^make\b", "make goals run in CI (.ci/run) and on a bare root (tools/fresh-root.sh)"),
    (r"^(scp|ssh)\b", "runs against a remote device; transport-install runs the init script"),
    (r"^(\w+=\S* )*tools/run-tests\.sh\b", "runs (part of) this suite: it would recurse; make test runs it"),
    (r"^edgeprof-collector\b.*--clickhouse\b",
     "needs a ClickHouse server: collector-clickhouse runs these flags against a real one"),
]
def subst(l):
    for a, b in (("0.0.0.0:8443", "127.0.0.1:$PORT"), ("collector:8443", "127.0.0.1:$PORT"),
                 ("localhost:8443", "localhost:$PORT"), ("0.0.0.0:4040", "127.0.0.1:$HPORT"),
                 ("collector:4040", "127.0.0.1:$HPORT"), ("127.0.0.1:8080", "127.0.0.1:$HPORT"),
                 ("/var/lib/edgeprof/", w + "/var/lib/edgeprof/"), ("/tmp/", w + "/tmp/"),
                 ("/secure/", w + "/secure/"), ("--ring-size 1G", "--ring-size 64M"),
                 ("--seconds 10", "--seconds 2"), ("edgeprof-collector ...", "edgeprof-collector $MORE")):
        l = l.replace(a, b)
    return l
lines, block, out = [], None, []
for n, raw in enumerate(open(doc), 1):
    if block is None:
        if raw.rstrip() == "```sh":
            block = []
        continue
    if raw.startswith("```"):
        lines += block
        block = None
        continue
    block.append((n, raw.rstrip("\n")))
cmd, first = "", 0
for n, raw in lines:
    code = raw
    # a comment ends the code on a line (not inside quotes: '#' in a URL is not used here)
    m = re.search(r"(^|\s)#", code)
    if m:
        code = code[:m.start()]
    code = code.rstrip()
    if not cmd:
        first = n
    if code.endswith("\\"):
        cmd += code[:-1] + " "
        continue
    cmd = (cmd + code).strip()
    if not cmd:
        continue
    try:
        shlex.split(cmd)
    except ValueError:	# a quote open across lines: the command goes on
        cmd += "\n"
        continue
    why = next((r for p, r in NOT_RUN if re.search(p, cmd)), None)
    where = f"{name}:{first}"
    if why:
        out.append(f"echo {shlex.quote(f'-- not run here: {cmd}   ({why})')}")
        # a make line's goals must still exist: a renamed target is drift too
        for part in re.split(r"&&|;", cmd) if cmd.startswith("make") else []:
            words = shlex.split(part)
            if words and words[0] == "make":
                goals = [a for a in words[1:] if not a.startswith("-") and "=" not in a]
                out.append("check_make_goals " + " ".join(shlex.quote(g) for g in goals))
    else:
        c = subst(cmd)
        out.append(f"echo {shlex.quote(f'-- {where}: {cmd}')}")
        if re.match(r"^edgeprof-collector\b", c):
            nl = len(re.findall(r"--(http-)?listen ", c))
            out.append(f"{c} >>collector.log 2>&1 & echo $! >>pids; wait_listening {nl}")
        elif re.match(r"^edgeprof-agent\b", c) and "--once" not in c:
            # the bundled workload runs beside it: on an idle machine (a bare CI root) the
            # system-wide sampler has nothing to send, and the next command finds nothing
            work = os.path.join(os.environ["EP_BUILD"], "tests/workloads/split")
            out.append(f"{shlex.quote(work)} --seconds 4 >/dev/null &")
            out.append(f"timeout -s INT 4 {c} --round-seconds 2 --period-seconds 3 "
                       "--jitter-percent 0 || [ $? = 124 ]")
        else:
            out.append(c)
    cmd = ""
print("\n".join(out))
PY
}

run_doc() { # DOC
	local doc=$1 name w
	name=$(echo "$doc" | tr / _)
	w=$tmp/$name
	mkdir -p "$w/tmp" "$w/build" "$w/secure"
	ln -s "$B" "$w/build/host-x86_64"
	cp "$tmp"/inputs/* "$w/"
	gen "$EP_TOP/$doc" "$w" >"$w/session.sh" || fail "extracting $doc"
	grep -q '^echo ' "$w/session.sh" || fail "$doc: no \`\`\`sh block"
	cat >"$w/prelude.sh" <<EOF
set -eo pipefail
cd "$w"
export PATH="$B:\$PATH" PORT=$(free_port) HPORT=$(free_port) TOKEN=docs-test-token-1
export MORE="--listen 127.0.0.1:$(free_port) --tls-ca pki/ca.crt --tls-cert pki/server.crt --tls-key pki/server.key --ring $w/second.ring --ring-size 16M"
check_make_goals() { # GOAL...: each is a target of the Makefile (or a board's _defconfig)
	local g
	for g in "\$@"; do
		case \$g in
		*_defconfig) [ -f "$EP_TOP/boards/\${g%_defconfig}/defconfig" ] ;;
		*) grep -qE "^(\$g|[^:]* \$g|\$g [^:]*):" "$tmp/make-targets" ;;
		esac || { echo "make goal '\$g' is not in the Makefile"; return 1; }
	done
}
wait_listening() { # N: the newest collector logs N listeners, or it died
	local pid=\$(tail -n 1 pids)
	for _ in \$(seq 1 100); do
		[ "\$(grep -c 'listening on' collector.log)" -ge "\$((\$1 + \${seen:-0}))" ] && { seen=\$((\${seen:-0} + \$1)); return 0; }
		kill -0 "\$pid" 2>/dev/null || { cat collector.log; echo "the collector exited"; return 1; }
		sleep 0.1
	done
	cat collector.log; return 1
}
EOF
	echo "== $doc"
	if ! (cat "$w/prelude.sh" "$w/session.sh"; echo 'for p in $(cat pids 2>/dev/null); do kill $p; done; wait; true') |
		timeout 300 bash >"$w/out.log" 2>&1; then
		tail -n 30 "$w/out.log"
		fail "$doc: a documented command failed (the last '-- doc:line' above names it)"
	fi
	grep -E '^-- ' "$w/out.log"
	# commands that "succeed" without doing what the document says
	! grep -E "cannot be preloaded|command not found" "$w/out.log" || fail "$doc: see above"
	for p in $(cat "$w/pids" 2>/dev/null); do kill "$p" 2>/dev/null; done
}

# The Makefile's targets, read without building anything (help needs no configuration).
make -C "$EP_TOP" -prRq help 2>/dev/null | grep -E '^[A-Za-z%_.-][^=]*:' >"$tmp/make-targets"
grep -q '^menuconfig' "$tmp/make-targets" || fail "could not read the Makefile's targets"
for doc in README.md agent/README.md store/README.md docs/transport.md; do
	run_doc "$doc"
done
ran=$(cat "$tmp"/*/out.log | grep -cE '^-- [^ ]+:[0-9]+: ')
skipped=$(cat "$tmp"/*/out.log | grep -c '^-- not run here')
echo "PASS: $ran documented commands ran, $skipped not run here (reasons above)"
