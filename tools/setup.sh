#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what edgeprof needs from Debian's archive, in tiers, each the one before plus more:
#   build  what `make` needs for the board (tools/deps/build.list; an ARM board adds its cross
#          toolchain and a sysroot unpacked from the target's .deb files (multiarch installs of
#          :arm64 -dev packages fail on version skew here; download + dpkg -x does not))
#   demo   what `make demo` adds (demo.list)
#   test   what `make test` runs: every tools/deps/*.list (per test kind), both cross
#          toolchains and qemu-user; kernels and static busyboxes for the VM tests
#          (tests/lib/bpf-vm.sh): Debian 11's 5.10 (build/vm-5.10-amd64; with --arch arm64
#          build/vm-5.10-arm64) and for arm64 Debian 12's 6.1 (build/vm-arm64); on x86_64
#          Debian 13's python3.13 unpacked with its glibc (build/py313-root; with --arch arm64
#          or armhf, that architecture's in build/py313-root-ARCH, for the qemu-user tests)
# --static adds what a static board's musl toolchain needs (static.list; the test tier has it).
# With --bench, perf for that VM and an x86_64 VM (build/vm-amd64) for tests/bench/bpf-icount.sh.
#
#   tools/setup.sh [--arch x86_64|arm64|armhf] [--tier build|demo|test] [--static] [--bench]
#                                                          (as root; the default tier is test)
#
# A list's tier is its "# tier:" line (none: test). *.bench-list add the peers that only the
# benchmarks run (bcc and kernel headers: large, and no test depends on them). vm.target-list
# names target .debs for the arm64 VM test, vm-5.10-*.target-list the 5.10 ones (from the suite
# of their "# suite:" line), vm.bench-target-list those the arm64 benchmark adds (perf),
# py313-ARCH.target-list trixie's python3.13, node18-amd64.target-list bookworm's node 18:
# downloaded and unpacked, never installed.
set -euo pipefail

arch=x86_64
tier=test
static=
bench=
while [ $# -gt 0 ]; do
	case "$1" in
	--arch) arch="$2"; shift 2 ;;
	--tier) tier="$2"; shift 2 ;;
	--static) static=1; shift ;;
	--bench) bench=1; shift ;;
	-h|--help) sed -n '3,19p' "$0"; exit 0 ;;
	*) echo "setup: unknown argument $1" >&2; exit 2 ;;
	esac
done
case "$tier" in
build|demo|test) ;;
*) echo "setup: unknown tier $tier (build, demo, test)" >&2; exit 2 ;;
esac
# Every ARM board is static; the test tier builds every board (testconfigs).
[ "$arch" = x86_64 ] && [ "$tier" != test ] || static=1

top=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" != 0 ]; then
	echo "setup: needs root to install Debian packages. Run: sudo $0 --arch $arch --tier $tier" >&2
	exit 1
fi

# Every list but target.list names host packages.
list_packages() {
	local f
	for f in "$@"; do sed -e 's/#.*//' "$f"; done | tr -s ' \t\n' '\n' | sed '/^$/d' | sort -u
}

export DEBIAN_FRONTEND=noninteractive
apt_update() {
	# One failing index (a mirror hiccup, a foreign architecture's list) must not stop us.
	apt-get update -qq || echo "setup: apt-get update reported errors; continuing" >&2
}

# The lists of a tier: their "# tier:" line at or below it (static.list with --static).
rank() { case "$1" in build) echo 1 ;; demo) echo 2 ;; static) echo 3 ;; *) echo 4 ;; esac; }
tier_lists() {
	local f t want
	want=$(rank "$tier")
	for f in "$top"/tools/deps/*.list; do
		[ "$(basename "$f")" != target.list ] || continue
		t=$(sed -n 's/^# tier: *//p' "$f" | head -n 1)
		t=${t:-test}
		if [ "$t" = static ]; then [ -n "$static" ] && echo "$f"; continue; fi
		[ "$(rank "$t")" -le "$want" ] && echo "$f"
	done
	return 0
}
host_lists=$(tier_lists)
[ -n "$bench" ] && host_lists="$host_lists $(ls "$top"/tools/deps/*.bench-list)"
# shellcheck disable=SC2086
host_pkgs=$(list_packages $host_lists)
case "$arch" in
x86_64) cross_pkgs= ;;
arm64)  cross_pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
armhf)  cross_pkgs="gcc-arm-linux-gnueabihf libc6-dev-armhf-cross" ;;
*) echo "setup: unknown arch $arch (x86_64, arm64, armhf)" >&2; exit 2 ;;
esac
# The suite builds every board and runs the ARM ones under qemu-user: both toolchains.
[ "$tier" != test ] ||
	cross_pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf
		    libc6-dev-armhf-cross qemu-user"

missing=$(dpkg-query -W -f='${Package} ${Status}\n' $host_pkgs $cross_pkgs 2>/dev/null |
	awk '$NF != "installed" {print $1}' || true)
# dpkg-query prints nothing for packages it has never heard of: count those as missing too.
for p in $host_pkgs $cross_pkgs; do
	dpkg-query -W "$p" >/dev/null 2>&1 || missing="$missing $p"
done
# A name an installed package provides is there already (a vendor's nodejs provides npm; asking
# apt for Debian's npm beside it would conflict).
provided=" $(dpkg-query -W -f='${Provides}\n' 2>/dev/null | tr ',' '\n' | sed 's/(.*//; s/ //g' |
	sort -u | tr '\n' ' ') "
missing=$(for p in $missing; do [[ "$provided" == *" $p "* ]] || echo "$p"; done | sort -u | tr '\n' ' ')
case "$tier" in
build) what="what a build needs" ;;
demo)  what="what the demo needs" ;;
test)  what="what the test suite needs" ;;
esac
[ -z "$static" ] || [ "$tier" = test ] || what="$what, static board"
if [ -n "${missing// /}" ]; then
	t0=$(date +%s)
	apt_update
	# One line before: what and how much (apt's own figures, from the URIs it would fetch).
	# shellcheck disable=SC2086
	cost=$(apt-get install -y --no-install-recommends --print-uris -qq $missing 2>/dev/null |
		awk -v q="'" 'substr($1, 1, 1) == q {n++; s += $3}
		END {printf "%d packages, %.0f MB to download", n, s / 1e6}')
	echo "setup: installing $what ($arch, tools/deps/: $(for f in $host_lists; do
		basename "$f"; done | tr '\n' ' ' | sed 's/ $//')): $cost"
	log=$(mktemp)
	# shellcheck disable=SC2086
	apt-get install -y --no-install-recommends $missing >"$log" 2>&1 ||
		{ tail -n 30 "$log"; rm -f "$log"; echo "setup: apt-get install failed" >&2; exit 1; }
	echo "setup: installed in $(($(date +%s) - t0)) s ($(grep -E '^After this operation' "$log" |
		sed 's/^After this operation, //; s/\.$//' || true))"
	rm -f "$log"
fi

# tools/musl.sh builds the static boards' libraries from Debian's source packages (apt-get
# source): a deb-src twin of each bookworm entry of this machine's sources (deb822 or one-line).
deb_src() {
	local f=/etc/apt/sources.list.d/edgeprof-src.sources s
	[ -f "$f" ] && return 0
	{
		echo "# Written by edgeprof's tools/setup.sh: Debian's sources for tools/musl.sh."
		for s in /etc/apt/sources.list.d/*.sources; do
			[ -f "$s" ] || continue
			awk 'BEGIN { RS = ""; ORS = "\n\n" }
			/(^|\n)Types:[^\n]*deb/ && /(^|\n)Suites:[^\n]*bookworm/ && !/\nEnabled: *no/ {
				sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$s"
		done
	} >"$f.tmp"
	for s in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$s" ] || continue
		sed -n 's/^deb\([[:space:]].*[[:space:]]bookworm[[:space:]-].*\)/deb-src\1/p' "$s"
	done >"${f%.sources}.list.tmp"
	mv "$f.tmp" "$f"
	mv "${f%.sources}.list.tmp" "${f%.sources}.list"
	apt_update
}
[ -z "$static" ] || deb_src

make_sysroot() {
	local a=$1 sysroot="$top/build/sysroot-$1" debs="$top/build/debs-$1"
	[ -f "$sysroot/.complete" ] && return 0
	echo "setup: building the $a sysroot from Debian .debs in $sysroot"
	dpkg --print-foreign-architectures | grep -qx "$a" || dpkg --add-architecture "$a"
	apt_update
	rm -rf "$sysroot" "$debs"
	mkdir -p "$sysroot" "$debs"
	local pkgs
	pkgs=$(list_packages "$top/tools/deps/target.list" | sed "s/\$/:$a/")
	# shellcheck disable=SC2086
	(cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root $pkgs)
	for d in "$debs"/*.deb; do dpkg -x "$d" "$sysroot"; done
	touch "$sysroot/.complete"
}

# A kernel meta package (linux-image-cloud-arm64) depends on the image of the current ABI
# (linux-image-6.1.0-NN-cloud-arm64): download that one, whatever NN is today.
kernel_of() {
	local p=$1
	shift
	{ apt-cache "$@" depends "$p" 2>/dev/null || true; } |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ && !n++ {print $2}'
}

# A list whose "# suite:" line names another Debian suite than this machine's (bullseye, for its
# 5.10 kernels) is fetched through a private apt set-up under build/apt-<suite>: this machine's
# mirror, that suite's main, with apt's own options (Dir::Etc::SourceList, Dir::State::Lists),
# never in this machine's sources. Only the suite itself, not its -security updates: a released
# suite does not move, and the mirror here serves no -security pool for every architecture.
apt_suite_opts() {
	local suite=$1 a=$2 dir="$top/build/apt-$1" uri
	uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
	[ -n "$uri" ] || uri=$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\/debian\)[[:space:]].*/\2/p' \
		/etc/apt/sources.list 2>/dev/null | head -n 1)
	mkdir -p "$dir/lists/partial" "$dir/cache"
	echo "deb [arch=$a signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${uri:-http://deb.debian.org/debian} $suite main" \
		>"$dir/sources-$a.list"
	# an empty dpkg status: what this machine has installed (e.g. NodeSource's nodejs 20,
	# newer than the suite's) is not the candidate apt downloads
	: >"$dir/status"
	echo "-o Dir::Etc::SourceList=$dir/sources-$a.list -o Dir::Etc::SourceParts=/dev/null" \
	     "-o Dir::State::Lists=$dir/lists -o Dir::Cache=$dir/cache -o APT::Architectures::=$a" \
	     "-o Dir::State::status=$dir/status"
}

# A VM test boots vmlinuz with an initramfs built around busybox: keep only those files (the
# kernel's modules are 100 MB the test does not load). make_vm ARCH LIST [DIR]: DIR is
# build/vm-ARCH unless given.
make_vm() {
	local a=$1 list=$2 vm="${3:-$top/build/vm-$1}" p k pkgs='' suite opts=''
	[ -f "$vm/.complete" ] && return 0
	suite=$(sed -n 's/^# suite: *//p' "$top/tools/deps/$list" | head -n 1)
	echo "setup: fetching the $a VM's kernel and busybox${suite:+ ($suite)} into $vm"
	if [ -n "$suite" ]; then
		opts=$(apt_suite_opts "$suite" "$a")
		# shellcheck disable=SC2086
		apt-get $opts update -qq || { echo "setup: cannot reach Debian $suite" >&2; exit 1; }
	else
		[ "$a" = "$(dpkg --print-architecture)" ] ||
			dpkg --print-foreign-architectures | grep -qx "$a" || dpkg --add-architecture "$a"
		apt_update # the kernel's ABI moves: stale lists name an image the mirror no longer has
	fi
	rm -rf "$vm"
	mkdir -p "$vm/debs" "$vm/x"
	for p in $(list_packages "$top/tools/deps/$list"); do
		# shellcheck disable=SC2086
		k=$(kernel_of "$p:$a" $opts)
		k=${k%%:*} # apt names a foreign architecture's package with its :arch, a native one bare
		pkgs="$pkgs ${k:-$p}:$a"
	done
	# shellcheck disable=SC2086
	(cd "$vm/debs" && apt-get $opts download -qq -o APT::Sandbox::User=root $pkgs)
	for d in "$vm"/debs/*.deb; do dpkg -x "$d" "$vm/x"; done
	cp "$vm"/x/boot/vmlinuz-* "$vm/vmlinuz"
	cp "$vm"/x/boot/config-* "$vm/config"
	cp "$vm/x/bin/busybox" "$vm/busybox"
	(cd "$vm/debs" && ls) >"$vm/debs.txt"
	rm -rf "$vm/x" "$vm/debs"
	touch "$vm/.complete"
}

# The peer of tests/bench/bpf-icount.sh inside its VMs: perf and the shared libraries it links
# (its dependencies followed to the leaves; perl, python and libc itself are not needed: the VM
# takes libc from the cross toolchain or this machine, and perf runs no scripts there).
make_vm_perf() {
	local a=$1 dir="$top/build/vm-$1/perf" p pkgs= sfx=":$1"
	[ -f "$dir/.complete" ] && return 0
	echo "setup: fetching perf for the $a VM into $dir"
	rm -rf "$dir"
	mkdir -p "$dir/debs" "$dir/x" "$dir/bin" "$dir/lib"
	[ "$a" != "$(dpkg --print-architecture)" ] || sfx= # apt names native packages bare
	for p in $(list_packages "$top/tools/deps/vm.bench-target-list"); do
		pkgs="$pkgs $(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
			--no-breaks --no-replaces --no-enhances "$p:$a" 2>/dev/null |
			grep -E "^(lib[^ :]*|zlib[^ :]*|$p)$sfx\$" |
			grep -v -E -- '-(stdlib|minimal)(:|$)|^libc6(:|$)' |
			sort -u | tr '\n' ' ')"
	done
	# shellcheck disable=SC2086
	(cd "$dir/debs" && apt-get download -qq -o APT::Sandbox::User=root $pkgs)
	for p in "$dir"/debs/*.deb; do dpkg -x "$p" "$dir/x"; done
	cp "$dir/x/usr/bin/perf" "$dir/bin/"
	find "$dir/x/lib" "$dir/x/usr/lib" -maxdepth 2 -name '*.so*' -exec cp -P {} "$dir/lib/" \;
	(cd "$dir/debs" && ls) >"$dir/debs.txt"
	rm -rf "$dir/x" "$dir/debs"
	touch "$dir/.complete"
}

# A root with another suite's interpreter and the libraries it runs on (py313-*.target-list):
# its .debs unpacked, never installed; the test runs it with the root's own loader.
make_pyroot() {
	local a=$1 list=$2 root=$3 p pkgs='' suite opts
	[ -f "$root/.complete" ] && return 0
	suite=$(sed -n 's/^# suite: *//p' "$top/tools/deps/$list" | head -n 1)
	echo "setup: fetching Debian $suite's packages of $list into $root"
	opts=$(apt_suite_opts "$suite" "$a")
	# shellcheck disable=SC2086
	apt-get $opts update -qq || { echo "setup: cannot reach Debian $suite" >&2; exit 1; }
	rm -rf "$root"
	mkdir -p "$root/debs"
	for p in $(list_packages "$top/tools/deps/$list"); do pkgs="$pkgs $p:$a"; done
	# shellcheck disable=SC2086
	(cd "$root/debs" && apt-get $opts download -qq -o APT::Sandbox::User=root $pkgs)
	for p in "$root"/debs/*.deb; do dpkg -x "$p" "$root"; done
	(cd "$root/debs" && ls) >"$root/debs.txt"
	rm -rf "$root/debs"
	touch "$root/.complete"
}

case "$arch" in
arm64) make_sysroot arm64
       [ "$tier" != test ] || { make_vm arm64 vm.target-list
				make_vm arm64 vm-5.10-arm64.target-list "$top/build/vm-5.10-arm64"
				make_pyroot arm64 py313-arm64.target-list "$top/build/py313-root-arm64"; }
       [ -z "$bench" ] || make_vm_perf arm64 ;;
x86_64) [ "$tier" != test ] || { make_vm amd64 vm-5.10-amd64.target-list "$top/build/vm-5.10-amd64"
				 make_pyroot amd64 py313-amd64.target-list "$top/build/py313-root"
				 make_pyroot amd64 node18-amd64.target-list "$top/build/node18-root"; }
	[ -z "$bench" ] || { make_vm amd64 vm-amd64.bench-target-list; make_vm_perf amd64; } ;;
armhf) make_sysroot armhf
       [ "$tier" != test ] || make_pyroot armhf py313-armhf.target-list "$top/build/py313-root-armhf" ;;
esac
