#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make install DESTDIR=...: binaries, the agent's config file (kept when it exists), systemd units
# and the BusyBox/OpenWrt init script, with the right modes; the units parse (systemd-analyze);
# the init script starts, reports and stops a daemon under BusyBox sh + start-stop-daemon with
# --config, making the spool directory the config names; the config parses as the agent's. The daemon is a stand-in script that records its
# arguments: the agent's own flags are tested by its own tests.
set -euo pipefail
: "${EP_TOP:?}" "${EP_BUILD:?}"
W=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-install.XXXXXX")
trap 'EDGEPROF_PIDFILE=$W/agent.pid sh "$W/root/etc/init.d/edgeprof-agent" stop >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mode() { stat -c %a "$1"; }

R=$W/root
# the build's own (relative) O: an absolute one names other object paths and rebuilds
O=$(realpath --relative-to="$EP_TOP" "$EP_BUILD")
make -s --no-print-directory -C "$EP_TOP" BOARD=host-x86_64 O="$O" install DESTDIR="$R" \
	>"$W/install.log" 2>&1 || { cat "$W/install.log"; fail "make install"; }
for f in usr/bin/edgeprof-agent usr/bin/edgeprof-collector usr/bin/edgeprof \
	 etc/edgeprof/edgeprof-agent.conf etc/init.d/edgeprof-agent \
	 usr/lib/systemd/system/edgeprof-agent.service usr/lib/systemd/system/edgeprof-collector.service \
	 usr/share/doc/edgeprof/transport.md; do
	[ -e "$R/$f" ] || fail "missing $f"
done
[ "$(mode "$R/etc/edgeprof/edgeprof-agent.conf")" = 640 ] || fail "config mode"
[ "$(mode "$R/etc/init.d/edgeprof-agent")" = 755 ] || fail "init script mode"
[ "$(mode "$R/var/lib/edgeprof")" = 700 ] || fail "spool directory mode"
[ "$(mode "$R/usr/lib/systemd/system/edgeprof-agent.service")" = 644 ] || fail "unit mode"

echo "-- a second install keeps the device's own configuration"
echo 'hz = 7 # site=lab' >>"$R/etc/edgeprof/edgeprof-agent.conf"
make -s --no-print-directory -C "$EP_TOP" BOARD=host-x86_64 O="$O" install DESTDIR="$R" >/dev/null 2>&1
grep -q 'site=lab' "$R/etc/edgeprof/edgeprof-agent.conf" || fail "install overwrote the config"

if command -v systemd-analyze >/dev/null; then
	echo "-- systemd units parse"
	for u in edgeprof-agent edgeprof-collector; do
		systemd-analyze verify "$R/usr/lib/systemd/system/$u.service" >"$W/$u.verify" 2>&1 || true
		# the binaries are not installed on this host: only syntax problems count
		if grep -E "Unknown (key|section)|Failed to parse|Invalid|bad-setting" "$W/$u.verify"; then
			fail "$u.service does not parse"
		fi
	done
fi

if ! command -v busybox >/dev/null; then
	echo "skip: busybox is not installed (tools/deps/transport.list), init script not run"
	exit 77
fi
echo "-- the init script under BusyBox"
mkdir -p "$W/bin" "$W/rc.d"
for a in sh start-stop-daemon pidof sleep kill cat; do ln -s "$(command -v busybox)" "$W/bin/$a"; done
cat >"$W/fake-agent" <<EOF2
#!/bin/sh
echo "\$@" >"$W/agent.args"
exec sleep 600
EOF2
chmod +x "$W/fake-agent"
sed -i 's|^spool = .*|spool = '"$W"'/spool/spool.ring  # moved for the test|' "$R/etc/edgeprof/edgeprof-agent.conf"
init() {
	PATH="$W/bin:/usr/bin:/bin" EDGEPROF_DAEMON="$W/fake-agent" \
		EDGEPROF_CONF="$R/etc/edgeprof/edgeprof-agent.conf" EDGEPROF_PIDFILE="$W/agent.pid" \
		EDGEPROF_RCDIR="$W/rc.d" busybox sh "$R/etc/init.d/edgeprof-agent" "$@"
}
init start
for i in $(seq 1 50); do [ -s "$W/agent.args" ] && break; sleep 0.1; done
cat "$W/agent.args"
[ "$(cat "$W/agent.args")" = "--config $R/etc/edgeprof/edgeprof-agent.conf" ] ||
	fail "the daemon was not started with the config file"
[ "$(mode "$W/spool")" = 700 ] || fail "spool directory (named in the config) not made 0700"

echo "-- the installed config is one the agent's --config parser reads (transport lines aside)"
# its values are strdup'd for the life of the process on purpose: not a leak to report here
export ASAN_OPTIONS=detect_leaks=0
# Until the agent daemon takes the transport options, only the other lines can be checked.
grep -vE '^(upload|tls-ca|tls-cert|tls-key|spool|spool-size) ' "$R/etc/edgeprof/edgeprof-agent.conf" \
	>"$W/sampling.conf"
if ! "$EP_BUILD/edgeprof-agent" --config "$R/etc/edgeprof/edgeprof-agent.conf" --help >/dev/null 2>"$W/cfg.err"; then
	grep -q "unknown option 'upload'" "$W/cfg.err" ||
		{ cat "$W/cfg.err"; fail "the agent does not read the installed config"; }
	"$EP_BUILD/edgeprof-agent" --config "$W/sampling.conf" --help >/dev/null ||
		fail "the agent refuses the sampling lines of the installed config"
	echo "   (this agent build does not take the transport options yet)"
fi
init status | grep running >/dev/null || fail "status does not say running"
init start | grep "already running" >/dev/null || fail "a second start did not notice"
pid=$(cat "$W/agent.pid")
init stop
kill -0 "$pid" 2>/dev/null && fail "stop left the daemon running"
rc=0; init status >/dev/null || rc=$?
[ "$rc" = 3 ] || fail "status after stop should exit 3, got $rc"
init enable
[ -L "$W/rc.d/S95edgeprof-agent" ] || fail "enable made no S95 link"
init disable
[ ! -e "$W/rc.d/S95edgeprof-agent" ] || fail "disable left the link"
echo "ok"
