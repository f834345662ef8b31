# SPDX-License-Identifier: MIT
# Shared by tests that need ClickHouse (sourced after collector-lib.sh, which owns $T and the
# cleanup): our own clickhouse-server (Debian's 18.16) on loopback ports nobody else uses, with
# its data in $T, never the system service. ch_start N starts instance N (0, 1, ...), ch_stop N
# stops it (SIGTERM), ch_kill N kill -9s it; ch_sql N "SQL" runs one statement over HTTP.
CH_SERVER=${CH_SERVER:-/usr/sbin/clickhouse-server}
[ -x "$CH_SERVER" ] || { echo "clickhouse-server not installed (tools/deps/clickhouse.list)"; exit 77; }
# CH_BASE: the first of the ports the instances use (instance N: HTTP CH_BASE+10N, native +1).
# Chosen below the kernel's ephemeral range, whose ports any outgoing connection may hold (CI
# once drew 36716 while a connection of another test held it: "Address already in use"), and
# away from every port /proc/net/tcp shows in use.
ch_ports_free() { # BASE: none of BASE..BASE+49 is a local port of a socket now
	local port
	for port in $(awk 'FNR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
		port=$((16#$port))
		[ "$port" -ge "$1" ] && [ "$port" -le $(($1 + 49)) ] && return 1
	done
	return 0
}
ch_pick_base() {
	local eph b
	eph=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$eph" -gt 12000 ] 2>/dev/null || eph=32768
	for _ in $(seq 50); do
		b=$((10000 + RANDOM % (eph - 10100)))
		ch_ports_free "$b" && { echo "$b"; return; }
	done
	echo "$b"
}
CH_BASE=${CH_BASE:-$(ch_pick_base)}
# The server's jemalloc (Debian's clickhouse-server links the system's libjemalloc 5.3): large
# blocks in the ordinary arenas (oversize_threshold:0; by default every allocation of 8 MiB or
# more goes to an arena that returns its pages to the kernel at once, so each INSERT and merge
# faulted and zeroed its blocks' memory anew), freed pages returned after 5 s. Replays of the
# fleet bench's ingest: -16% of clickhouse-server's CPU per profile, merges included (store/README.md,
# "ClickHouse's allocator"). CH_MALLOC_CONF= (empty) for jemalloc's defaults; CH_ENV='VAR=value
# ...' adds variables to the server's environment.
CH_MALLOC_CONF=${CH_MALLOC_CONF-oversize_threshold:0,dirty_decay_ms:5000,muzzy_decay_ms:5000}
CH_PIDS=()

ch_need() { # FLAG: skips the test unless the collector has FLAG (CONFIG_COLLECTOR_CLICKHOUSE...)
	"$COLLECTOR" --help 2>&1 | grep -q -- "$1" ||
		{ echo "collector built without CONFIG_COLLECTOR_CLICKHOUSE ($1)"; exit 77; }
}

ch_http_port() { echo $((CH_BASE + 10 * $1)); }

CH_COLLECTORS=()
ch_cleanup() {
	local p
	for p in "${CH_COLLECTORS[@]}" "${CH_PIDS[@]}"; do
		[ -n "$p" ] && kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
	done
	ep_cleanup
}
trap ch_cleanup EXIT

ch_config() { # N: writes $T/ch$N/config.xml (+ users.xml)
	local d=$T/ch$1 http tcp
	http=$(ch_http_port "$1")
	tcp=$((http + 1))
	mkdir -p "$d/data" "$d/tmp" "$d/user_files" "$d/format_schemas"
	cp /etc/clickhouse-server/users.xml "$d/users.xml"
	cat >"$d/config.xml" <<XML
<yandex>
  <logger><level>warning</level><log>$d/server.log</log><errorlog>$d/error.log</errorlog></logger>
  <http_port>$http</http_port>
  <tcp_port>$tcp</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <max_connections>256</max_connections>
  <max_concurrent_queries>32</max_concurrent_queries>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <path>$d/data/</path>
  <tmp_path>$d/tmp/</tmp_path>
  <user_files_path>$d/user_files/</user_files_path>
  <format_schema_path>$d/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  ${CH_EXTRA_CONFIG:-}
</yandex>
XML
}

ch_start() { # N: starts instance N and waits for /ping
	local port
	port=$(ch_http_port "$1")
	[ -f "$T/ch$1/config.xml" ] || ch_config "$1"
	env ${CH_MALLOC_CONF:+MALLOC_CONF=$CH_MALLOC_CONF} ${CH_ENV:-} "$CH_SERVER" --config-file="$T/ch$1/config.xml" >>"$T/ch$1/stdout.log" 2>&1 &
	CH_PIDS[$1]=$!
	for _ in $(seq 300); do
		[ "$(curl -s "http://127.0.0.1:$port/ping" 2>/dev/null)" = Ok. ] && return 0
		kill -0 "${CH_PIDS[$1]}" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 20 "$T/ch$1/error.log" "$T/ch$1/stdout.log" 2>/dev/null
	fail "clickhouse-server $1 did not start on port $port"
}

ch_stop() { kill "${CH_PIDS[$1]}" 2>/dev/null; wait "${CH_PIDS[$1]}" 2>/dev/null; CH_PIDS[$1]=; }
ch_kill() { kill -9 "${CH_PIDS[$1]}" 2>/dev/null; wait "${CH_PIDS[$1]}" 2>/dev/null; CH_PIDS[$1]=; }

ch_sql() { # N SQL
	curl -sS --data-binary "$2" "http://127.0.0.1:$(ch_http_port "$1")/"
}

# start_ch_collector NAME URL [flags...]: a collector on ClickHouse (no ring), mTLS on
# 127.0.0.1:0; sets CC_PORT and CC_PID, log in $T/NAME.log.
start_ch_collector() {
	local name=$1 url=$2
	shift 2
	: >"$T/$name.log"
	"$COLLECTOR" --listen 127.0.0.1:0 --tls-ca "$T/pki/ca.crt" --tls-cert "$T/pki/server.crt" \
		--tls-key "$T/pki/server.key" --clickhouse "$url" --debuginfo-dir "$T/$name.dbg" \
		"$@" >>"$T/$name.log" 2>&1 &
	CC_PID=$!
	CH_COLLECTORS+=("$CC_PID")
	for _ in $(seq 200); do
		CC_PORT=$(sed -n 's/.*mutual TLS, port \([0-9]*\)).*/\1/p' "$T/$name.log" | tail -n 1)
		[ -n "$CC_PORT" ] && return 0
		kill -0 "$CC_PID" 2>/dev/null || { cat "$T/$name.log"; fail "$name exited at start"; }
		sleep 0.05
	done
	fail "$name did not start listening"
}
