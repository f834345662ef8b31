# SPDX-License-Identifier: MIT
# Sourced by the BPF tests that judge interpreter frames (bpf-lua, bpf-python, bpf-python313,
# bpf-node-v8): the test's shell, and so every process it starts, in a cgroup v2 of its own,
# which the agent samples alone (--bpf-cgroup). On a machine busy with other processes (a
# shared CI runner) the CFI tables fill with their files and the native walk stops short of
# the interpreter's loop: that is the tables' bound (bpf/README.md), not the frames these
# tests judge (CI's bpf-lua: 95.0 % system-wide against 99.0-99.6 % in its cgroup). Without a
# writable cgroup v2, or with EP_BPF_SYSTEM_WIDE=1 (to see the agent's default at work), the
# agent samples the whole machine, and the test says so.
#   bpf_own_cgroup NAME   sets cg (the cgroup's directory, or empty) and only (the agent's
#                         "--bpf-cgroup DIR", or empty: use it unquoted)
#   bpf_leave_cgroup      the shell back where it was, the cgroup removed, once the test's
#                         processes are gone
#   bpf_test_cleanup      the EXIT trap: kills $pids, waits, leaves the cgroup, removes $tmp
#                         (kept with EP_KEEP=1)
#   bpf_probe_or_skip     exits 77 (skipped), saying why, where $probe cannot sample here
#   bpf_wait_sampling PID waits (20 s at most) until agent PID samples: its CPU events are open
#                         beside the mmap records' (2 per CPU)
bpf_own_cgroup() {
	local root
	cg= only=
	root=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	if [ -n "${EP_BPF_SYSTEM_WIDE:-}" ]; then
		echo "sampling the whole machine: EP_BPF_SYSTEM_WIDE is set"
		return 0
	fi
	if [ -z "$root" ] || [ ! -w "$root/cgroup.procs" ] || ! mkdir "$root/$1-$$" 2>/dev/null; then
		echo "sampling the whole machine: no writable cgroup v2"
		return 0
	fi
	cg=$root/$1-$$
	bpf_cg_from=$(awk -F: '$1 == "0" { print $3 }' /proc/$$/cgroup)
	echo $$ >"$cg/cgroup.procs" || { echo "FAIL: moving the test into $cg"; exit 1; }
	only="--bpf-cgroup $cg"
	bpf_cg_root=$root
	echo "sampling the test's own cgroup, $cg"
}

bpf_leave_cgroup() {
	[ -n "${cg:-}" ] || return 0
	echo $$ >"$bpf_cg_root${bpf_cg_from%/}/cgroup.procs" 2>/dev/null ||
		echo $$ >"$bpf_cg_root/cgroup.procs"
	rmdir "$cg" 2>/dev/null || true
}

bpf_test_cleanup() {
	for p in ${pids:-}; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	bpf_leave_cgroup
	[ -n "${EP_KEEP:-}" ] || rm -rf "${tmp:?}"
}

bpf_probe_or_skip() {
	if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
		cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
	fi
}

bpf_wait_sampling() {
	local n
	for _ in $(seq 200); do
		n=$(ls -l "/proc/$1/fd" 2>/dev/null | grep -c "perf_event")
		[ "$n" -ge "$((2 * $(nproc)))" ] && return 0
		sleep 0.1
	done
}
