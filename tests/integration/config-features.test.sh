#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Features compile out by whole files: the tiny board (SIGPROF + mTLS push only) is built next
# to the host board (everything on) and nm proves that each disabled module's symbols are
# absent from tiny's agent while present in the host's, and that tiny builds no collector/CLI.
set -u
top=$EP_TOP host=$EP_BUILD
tiny=$(mktemp -d /tmp/edgeprof-features.XXXXXX)
trap 'rm -rf "$tiny"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A clean make environment: this runs under `make test`.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top" O="$tiny" BOARD=tiny defconfig \
	>/dev/null || fail "tiny defconfig"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j2 -C "$top" O="$tiny" BOARD=tiny all \
	>"$tiny/build.log" 2>&1 || { tail "$tiny/build.log"; fail "tiny build"; }

syms() { nm "$1" | awk '{print $NF}'; }
syms "$host/edgeprof-agent.debug" >"$tiny/host.syms"
syms "$tiny/edgeprof-agent.debug" >"$tiny/tiny.syms"
has() { grep -q "^$2" "$tiny/$1.syms"; }

# module (Kconfig symbol off in tiny): a symbol prefix only that module defines or pulls in
for m in "SAMPLER_BPF bpf_sampler__" "SAMPLER_BPF bpf_object__" "SYMBOLIZE symbolizer__" \
	 "SYMBOLIZE elf_syms__" "SPOOL spool__" "SPOOL ringfile__" "PULL_SERVER pull__" \
	 "AGENT_SCRAPE scrape__" "AGENT_SCRAPE fetch_get" "AGENT_SCRAPE pprof_delta"; do
	set -- $m
	has host "$2" || fail "host agent lacks $2 (CONFIG_$1 on): test is stale"
	has tiny "$2" && fail "tiny agent has $2 although CONFIG_$1 is off"
	echo "ok: CONFIG_$1 off removes $2*"
done
# What tiny is for must be there.
for s in ring__drain transport__submit tls_conn__handshake pprof_builder__add_sample; do
	has tiny "$s" || fail "tiny agent lacks $s"
done
for b in edgeprof-collector edgeprof; do
	[ -e "$tiny/$b" ] && fail "tiny built $b (CONFIG_COLLECTOR/CONFIG_TOOLS off)"
done
echo "ok: tiny edgeprof-agent $(stat -c %s "$tiny/edgeprof-agent") bytes stripped," \
	"host $(stat -c %s "$host/edgeprof-agent") bytes"
