#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's first-run promise, checked on a bare machine: a minimal Debian bookworm root made
# with debootstrap from the archive this machine's apt uses, with only `make` added, gets a clean
# checkout (git clone of HEAD, no build/) and runs the README's commands in it through chroot, as
# root, with /proc, /sys, /dev (+ /dev/pts, /dev/shm), /sys/fs/bpf and /sys/kernel/tracing
# mounted. Prints what the set-up installed (packages, apt's "Need to get") and how long each
# command took. Everything it mounts is unmounted on every exit path.
#
#   tools/fresh-root.sh [--keep] [--cache DIR] [--work DIR] [CMD ...]
#
# CMD defaults to the README's two commands, "make demo" and "make test". The bare root is
# cached as a tarball in --cache (default /var/cache/edgeprof) and unpacked fresh each run; the
# packages the project installs are never cached. --keep leaves the root in --work (default
# /var/tmp/edgeprof-fresh) for a look afterwards. Variables named in FRESH_ENV (default
# "SKIP ONLY") are passed into the chroot. Needs root and debootstrap.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=/var/cache/edgeprof
work=/var/tmp/edgeprof-fresh
keep=
while [ $# -gt 0 ]; do
	case "$1" in
	--keep) keep=1; shift ;;
	--cache) cache=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	-h|--help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) echo "fresh-root: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || set -- "make demo" "make test"
[ "$(id -u)" = 0 ] || { echo "fresh-root: needs root (chroot, mounts). Run: sudo $0" >&2; exit 1; }
command -v debootstrap >/dev/null ||
	{ echo "fresh-root: debootstrap is missing. Run: apt-get install debootstrap" >&2; exit 1; }

say() { printf '\n=== fresh-root: %s\n' "$*"; }
secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# The Debian archive this machine's apt uses for bookworm: deb822 .sources or one-line .list.
apt_sources() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && grep -qE '^[^#]*bookworm' "$f" && echo "$f"
	done
	return 0
}
mirror_of() { # first URI of an entry for suite bookworm, component main
	awk '
	/^[[:space:]]*#/ { next }
	/^deb[[:space:]]/ { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /=/ && $i !~ /\]$/) break
			    if ($(i + 1) == "bookworm") { print $i; exit } next }
	/^URIs:/   { uri = $2 }
	/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") hit = 1 }
	/^[[:space:]]*$/ { if (hit && uri) { print uri; exit } uri = ""; hit = 0 }
	END { if (hit && uri) print uri }' "$@"
}
sources=$(apt_sources)
[ -n "$sources" ] || { echo "fresh-root: no bookworm entry in this machine's apt sources" >&2; exit 1; }
# shellcheck disable=SC2086
mirror=$(mirror_of $sources | head -n 1)
[ -n "$mirror" ] || { echo "fresh-root: no bookworm URI in $sources" >&2; exit 1; }
echo "fresh-root: Debian archive $mirror (from $(echo $sources))"

# The bare root, cached: debootstrap only (minbase), nothing of ours.
tarball=$cache/bookworm-minbase-$(echo "$mirror" | md5sum | cut -c1-8).tar
if [ ! -s "$tarball" ]; then
	say "debootstrap --variant=minbase bookworm from $mirror (cached in $tarball)"
	t0=$(date +%s)
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/debootstrap.XXXXXX")
	if ! debootstrap --variant=minbase bookworm "$tmp/root" "$mirror" >"$tmp/log" 2>&1; then
		tail -n 30 "$tmp/log"; rm -rf "$tmp"; echo "fresh-root: debootstrap failed" >&2; exit 1
	fi
	tar -C "$tmp/root" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
	rm -rf "$tmp"
	echo "fresh-root: bare root made in $(secs $(($(date +%s) - t0))), $(du -h "$tarball" | cut -f1)"
else
	echo "fresh-root: bare root from the cache $tarball"
fi

root=$work/root
t_prep=$(date +%s)
mounted=()
cleanup() {
	local rc=$? i pid r
	set +e
	# Whatever is still running inside the root was started by us: stop it before unmounting.
	for pid in $(ls /proc | grep -E '^[0-9]+$'); do
		r=$(readlink "/proc/$pid/root" 2>/dev/null) || continue
		[ "$r" = "$root" ] && kill -KILL "$pid" 2>/dev/null
	done
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" ||
			echo "fresh-root: could not unmount ${mounted[i]}" >&2
	done
	mounted=()
	if [ -z "$keep" ]; then rm -rf --one-file-system "$work"; else echo "fresh-root: kept $root"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A previous run killed hard may have left mounts: never delete through them.
if [ -d "$root" ]; then
	{ grep -F " $root" /proc/mounts || true; } | awk '{print $2}' | sort -r | xargs -r -n1 umount -l
	rm -rf --one-file-system "$work"
fi
mkdir -p "$root"
tar -C "$root" -xf "$tarball"

mnt() { # TYPE|--bind SRC DIR (in the root)
	mkdir -p "$root$3"
	if [ "$1" = --bind ]; then mount --bind "$2" "$root$3"; else mount -t "$1" "$2" "$root$3"; fi
	mounted+=("$root$3")
}
# The root is its own private mount first, so nothing mounted under it propagates back to this
# machine (a bind of a shared /dev would carry our /dev/shm onto the host's).
mnt --bind "$root" /
mount --make-rprivate "$root"
mnt proc proc /proc
mnt sysfs sysfs /sys
mnt --bind /dev /dev
mount --make-private "$root/dev"
mnt --bind /dev/pts /dev/pts
mnt tmpfs shm /dev/shm
mnt bpf bpf /sys/fs/bpf
mnt tracefs tracefs /sys/kernel/tracing
# The cgroup v2 hierarchy, as systemd mounts it on every Debian machine (/sys/fs/cgroup, the
# directory a fresh sysfs has for it; .../unified in hybrid mode, on this machine): the BPF
# tests sample their own cgroup (--bpf-cgroup) when they can, as they do outside the root
grep -q "^[^ ]* [^ ]* cgroup2 " /proc/mounts && mnt cgroup2 cgroup2 /sys/fs/cgroup
# The machine's own network set-up, as a fresh install on this network has it (nothing of the
# project): its resolver; the hosts file Debian's installer writes and debootstrap does not; the
# extra trust anchors of this network (e.g. a TLS-inspecting egress proxy's CA, which
# update-ca-certificates adds once ca-certificates is installed) and the variables naming them.
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	mkdir -p "$root/usr/local/share/ca-certificates" "$root/etc/ssl/certs"
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
	[ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	echo "fresh-root: this network's CAs: $(cd /usr/local/share/ca-certificates && echo *.crt)"
fi
machine_env=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR http_proxy https_proxy no_proxy \
	HTTP_PROXY HTTPS_PROXY NO_PROXY; do
	[ -n "${!v:-}" ] && machine_env+=("$v=${!v}")
done
[ ${#machine_env[@]} = 0 ] || echo "fresh-root: this machine's network variables: ${machine_env[*]}"
# The same archive and suites as this machine (bookworm-updates, -security), so the versions match.
rm -f "$root/etc/apt/sources.list"
for f in $sources; do cp "$f" "$root/etc/apt/${f#/etc/apt/}"; done

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root TERM=dumb LANG=C.UTF-8 "${machine_env[@]}" "$@"; }

say "adding make (the one package installed by hand)"
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends make >/dev/null
in_root dpkg-query -W -f='${Package}\n' | sort >"$work/before.txt"
echo "fresh-root: $(wc -l <"$work/before.txt") packages in the root"

say "a clean checkout of $(git -C "$top" rev-parse --short HEAD) in /src/edgeprof"
git clone -q --no-checkout "$top" "$root/src/edgeprof"
git -C "$root/src/edgeprof" checkout -q "$(git -C "$top" rev-parse HEAD)"
[ ! -e "$root/src/edgeprof/build" ] || { echo "fresh-root: build/ is in the checkout" >&2; exit 1; }

times=("$(printf '%-12s %s' "(the root)" "$(secs $(($(date +%s) - t_prep)))")  unpacked, mounted, make added, cloned")
envs=()
for v in ${FRESH_ENV:-SKIP ONLY}; do [ -n "${!v:-}" ] && envs+=("$v=${!v}"); done
status=0
for cmd in "$@"; do
	say "$cmd${envs[*]:+ (with ${envs[*]})}"
	t0=$(date +%s)
	# In the background and waited for: a signal (CI's timeout, a kill) runs the trap at once,
	# instead of after the command.
	rm -f "$work/rc"
	(set +e; in_root "${envs[@]}" /bin/sh -c "cd /src/edgeprof && $cmd" 2>&1; echo $? >"$work/rc") |
		tee -a "$work/commands.log" &
	wait $! || true
	rc=$(cat "$work/rc" 2>/dev/null || echo 255)
	t=$(($(date +%s) - t0))
	times+=("$(printf '%-12s %s  (exit %d)' "$cmd" "$(secs "$t")" "$rc")")
	[ "$rc" = 0 ] || { status=$rc; break; }
done

say "summary"
in_root dpkg-query -W -f='${Package}\n' | sort >"$work/after.txt"
added=$(comm -13 "$work/before.txt" "$work/after.txt")
echo "packages the set-up installed: $(echo "$added" | grep -c .)"
echo "$added" | tr '\n' ' ' | fold -s -w 100 | sed 's/^/    /'
echo
grep -h '^setup: \(installing\|Need to get\|After this\|installed in\)' "$work/commands.log" || true
for t in "${times[@]}"; do echo "time: $t"; done
# a failed test's last lines (tools/run-tests.sh), again at the end: the lines CI shows
[ "$status" = 0 ] || grep -A12 '^--- .*: last lines of' "$work/commands.log" | tail -n 80 || true
exit "$status"
