#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A simulated fleet against the ClickHouse backend on this machine (our own clickhouse-server,
# Debian's 18.16, loopback, data in a temp dir):
#
#   tests/bench/fleet-bench.sh [BUILD_DIR]
#     env: PHASES ("ingest query"), SECONDS_PER_RUN (30), DEVICES (1000), CLIENTS (64),
#          COLLECTORS (2), SPOOL (1: --ch-spool), BATCH_MS (2000), SAMPLES (3400 per profile),
#          PROFILES (1000000: the query phase's synthetic day), ROWS (130 per profile),
#          RAW_PEER (1),
#          CH_FLAGS (more collector flags, e.g. "--ch-queue 32M": spill to the spool sooner),
#          CH_DIR (ClickHouse's directory, kept after the run: a day generated once is reused)
#          CH_CAPTURE (a directory: the collectors' requests to ClickHouse go through
#          tests/bench/ch-capture.py, which records them there for tests/bench/ch-replay.sh)
#
# CH_DIR=dir: ClickHouse's config and data live in dir, not in the temp dir, and stay there.
#   The first run (PHASES="ingest query") fills it; later runs with PHASES=query and the same
#   PROFILES and ROWS find the day already generated and only run the queries (a 1M-profile
#   day takes 10-16 minutes to generate on this machine under load). The stacks come from
#   the first run's ingest (database edgeprof_fleet).
#
# ingest: the fleet's profiles are made by `pprof-tool fleet` from real profiles' stacks (Go's
#   runtime/pprof profiles that tests/oracle writes when go is installed, and the fuzz corpus's
#   Go profiles): 4 firmware versions, each with its own build-id and addresses and ~1 in 10
#   functions renamed, every real stack under one of 8 firmware tasks, 3,400 samples (~20 KB
#   gzip). DEVICES devices (labels node, version, region) upload through COLLECTORS collectors
#   over mutual TLS (collector-load --fleet, CLIENTS keep-alive connections spread over the
#   collectors) as fast as they are acknowledged. Prints profiles/s, each process's CPU, and
#   the storage on disk against the gzip bytes ingested. DEVICES sets how often a device repeats:
#   1,000 devices at ~1,500/s upload each about once a second; DEVICES=100000, a fleet at one
#   profile a minute each, repeats a device within a batch hardly ever. The hourly rollup sums by
#   group (labels but node: 4 versions x 4 regions), so both fold into it alike; summed by
#   series (samples_1h, before samples_1g), 100,000 devices doubled ClickHouse's CPU per
#   profile (store/README.md).
# query: PROFILES profiles of 10,000 devices over one day, ROWS sample rows each, generated in
#   ClickHouse with INSERT ... SELECT from the ingested stacks (synthetic rows, real stacks),
#   each device (gw-N, its node label too) in the device field as a certificate would set it
#   (a regression comparison's unit, tests/bench/regressions-bench.sh), then through a collector: the top 50 functions of one firmware version (merge by selector +
#   edgeprof top) and the fleet's flame graph (render flamebearer), warm, median of 3, over the
#   day and over the day less a half hour at each end (raw rows for those partial hours). The
#   generated rows are summed into the hourly rollup by hour and group (what collectors send at
#   ingest; each (region, version)'s group id got from the collector: one upload of each),
#   whose parts are then merged (OPTIMIZE ... FINAL: what a day of background merges leaves).
#   Beside each time, ClickHouse's own figures for the merge and series queries of those 3
#   requests (system.query_log: rows and bytes read, memory, ms, user CPU; medians by CPU):
#   load-independent evidence, where the times swing with the load of this shared machine.
#   RAW_PEER (1): the same queries through a collector that reads raw rows only
#   (--rollup-seconds 0), and their answers compared with the rollup's.
set -eu
export NCPU=$(nproc)
top=$(cd "$(dirname "$0")/../.." && pwd)
EP_BUILD=$(cd "${1:-$top/build/host-x86_64}" && pwd)
PHASES=${PHASES:-ingest query}
SECS=${SECONDS_PER_RUN:-30}
DEVICES=${DEVICES:-1000}
CLIENTS=${CLIENTS:-64}
COLLECTORS=${COLLECTORS:-2}
SPOOL=${SPOOL:-1}
BATCH_MS=${BATCH_MS:-2000}
SAMPLES=${SAMPLES:-3400}
PROFILES=${PROFILES:-1000000}
ROWS=${ROWS:-130}
. "$top/tests/lib/collector-lib.sh"
. "$top/tests/lib/clickhouse-lib.sh"
[ -x "$LOAD" ] || { echo "collector-load not built (make all-tests)"; exit 1; }

cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
op() { curl -gsS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" "$@"; }
median3() { sort -g | awk 'NR == 2'; }

make_pki
mkdir -p "$T/pool" "$T/fleet"
if [[ " $PHASES " == *" ingest "* ]]; then
	if command -v go >/dev/null; then
		(cd "$top/tests/oracle" && GOCACHE=$T/gocache GOFLAGS=-mod=mod go run . "$T/pool" 1 >/dev/null 2>&1) ||
			echo "(tests/oracle failed: the pool is the fuzz corpus's profiles only)"
	fi
	"$PPROF_TOOL" fleet "$T/fleet" 4 16 "$SAMPLES" "$T"/pool/*.pb.gz \
		"$top"/tests/fuzz/pprof-reader.corpus/go-*.gz.seed 2>&1 | sed 's/^/pool: /'
fi
if [ -n "${CH_DIR:-}" ]; then # kept: the config is rewritten for this run's paths
	mkdir -p "$CH_DIR"
	ln -s "$(cd "$CH_DIR" && pwd)" "$T/ch0"
	rm -f "$T/ch0/config.xml"
fi
ch_config 0
ch_start 0
# every query of the query phase in system.query_log (rows and bytes read, memory), for its
# figures. Not during ingest: logging each INSERT and lookup cost ClickHouse ~2% of the machine
# there (its SystemLogFlush thread writing a part of query_log every 7.5 s; perf record -a),
# which a production server, where log_queries is 0 by default, does not pay.
log_queries_on() {
	sed -i '0,/<default>/s//<default><log_queries>1<\/log_queries>/' "$T/ch0/users.xml"
	for _ in $(seq 150); do # ClickHouse reloads users.xml within seconds
		[ "$(ch_sql 0 "SELECT value FROM system.settings WHERE name = 'log_queries'")" = 1 ] &&
			return
		sleep 0.2
	done
	echo "query: ClickHouse did not reload $T/ch0/users.xml (log_queries)"
	exit 1
}
DB=edgeprof_fleet
echo "load: $(uptime)"
echo "fleet bench: $(nproc) CPUs, ClickHouse $(ch_sql 0 'SELECT version()'), profiles of" \
	"$(stat -c %s "$T/fleet/fw0-0.pb.gz" 2>/dev/null || echo "(not made: no ingest phase)") bytes (fw0-0)"

if [[ " $PHASES " == *" ingest "* ]]; then
	urls=() cpids=() ports=()
	ch_url="http://127.0.0.1:$(ch_http_port 0)/$DB"
	if [ -n "${CH_CAPTURE:-}" ]; then # the collectors' requests recorded for ch-replay.sh
		python3 "$top/tests/bench/ch-capture.py" $((CH_BASE + 7)) "$(ch_http_port 0)" "$CH_CAPTURE" &
		CH_COLLECTORS+=($!) # killed at exit with the collectors
		ch_url="http://127.0.0.1:$((CH_BASE + 7))/$DB"
		sleep 1
	fi
	for i in $(seq "$COLLECTORS"); do
		spool=()
		[ "$SPOOL" = 1 ] && spool=(--ch-spool "$T/spool$i" --ring-size 1G --fsync-ms 5)
		start_ch_collector "c$i" "$ch_url" \
			--ch-batch-ms "$BATCH_MS" --max-conns $((CLIENTS + 16)) \
			--max-handshakes $((CLIENTS + 16)) "${spool[@]}" ${CH_FLAGS:-}
		urls+=(--url "https://localhost:$CC_PORT") cpids+=("$CC_PID") ports+=("$CC_PORT")
	done
	c0=() ; for p in "${cpids[@]}"; do c0+=("$(cpu_of "$p")"); done
	h0=$(cpu_of "${CH_PIDS[0]}")
	/usr/bin/time -f '%U %S' -o "$T/load.time" \
		"$LOAD" "${urls[@]}" --ca "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" --key "$T/pki/dev-1.key" \
		--fleet "$T/fleet" --devices "$DEVICES" --clients "$CLIENTS" --seconds "$SECS" \
		--prefix fleet >"$T/load.log" 2>&1 || true
	cpu="" ; i=0
	for p in "${cpids[@]}"; do cpu+=" $(echo "$(cpu_of "$p") - ${c0[$i]}" | bc)"; i=$((i + 1)); done
	grep -v '^clients=' "$T/load.log" | sort | uniq -c | sort -rn | head -n 3 | sed 's/^/  load: /'
	n=$(sed -n 's/.*profiles=\([0-9]*\).*/\1/p' "$T/load.log")
	echo "ingest: $(cat "$T/load.log" | grep '^clients=')"
	echo "ingest: $n profiles acknowledged by $COLLECTORS collectors in ${SECS}s:" \
		"$(echo "$n / $SECS" | bc) profiles/s (spool $SPOOL, batches $BATCH_MS ms)"
	echo "cpu (load phase): collectors$cpu s"
	d0=$(date +%s.%N)
	for _ in $(seq 600); do # the spools drained: everything acknowledged is in
		[ "$(ch_sql 0 "SELECT count() FROM $DB.profiles")" -ge "$n" ] && break
		sleep 0.5
	done
	d1=$(date +%s.%N)
	awk -v n="$n" -v s="$SECS" -v d="$(echo "$d1 - $d0" | bc)" 'BEGIN { printf "into ClickHouse: all %d in %.1f s after the load ended: %.0f profiles/s sustained\n", n, d, n / (s + d) }'
	# spilled uploads are decoded twice; waits are the back-pressure that avoids them
	for p in "${ports[@]}"; do
		op "https://localhost:$p/metrics" | awk '/^edgeprof_collector_clickhouse_(spool_spilled|spool_replayed|spool_refused|refused_full|waits|wait_timeouts|wait_milliseconds)_total / {
			sub("edgeprof_collector_clickhouse_", "", $1); sub("_total", "", $1); s = s " " $1 " " $2 }
			END { print "collector:" s }'
	done
	cpu="" ; i=0
	for p in "${cpids[@]}"; do cpu+=" $(echo "$(cpu_of "$p") - ${c0[$i]}" | bc)"; i=$((i + 1)); done
	hcpu=$(echo "$(cpu_of "${CH_PIDS[0]}") - $h0" | bc)
	echo "cpu: clickhouse-server $hcpu s, collectors$cpu s (until all in)"
	# per profile, each process (the load-independent figure): on 2 CPUs, 1,500/s needs a sum
	# of at most 2 / 1500 s = 1.33 ms
	awk -v n="$n" -v h="$hcpu" -v c="$cpu" -v l="$(tail -n 1 "$T/load.time")" 'BEGIN {
		k = split(c, cs, " "); for (i = 1; i <= k; i++) cc += cs[i]; split(l, ls, " ")
		lg = ls[1] + ls[2]
		printf "cpu per profile: clickhouse-server %.3f ms, collectors %.3f ms, load generator %.3f ms: %.3f ms (1,500/s on %d CPUs: <= %.2f ms)\n", 1000 * h / n, 1000 * cc / n, 1000 * lg / n, 1000 * (h + cc + lg) / n, ENVIRON["NCPU"], ENVIRON["NCPU"] / 1.5 }'
	ch_sql 0 "SELECT groupArray(value) FROM (SELECT value FROM system.events WHERE event IN ('InsertQuery', 'MergeTreeDataWriterBlocks', 'MergeTreeDataWriterBlocksAlreadySorted') ORDER BY event)" |
		tr -d '[]' | awk -F, '{printf "clickhouse: %d INSERTs, %d parts written, %d of them sorted already (sample rows come sorted)\n", $1, $2, $3}'
	# what merging is left when all is in (the cpu line above stops there): ClickHouse's CPU
	# until its merges are done (up to 60 s), and the rows they merged over the whole run
	m=$(ch_sql 0 "SELECT count() FROM system.merges")
	for _ in $(seq 60); do
		[ "$(ch_sql 0 "SELECT count() FROM system.merges")" = 0 ] && break
		sleep 1
	done
	echo "clickhouse: $m merges running when all was in; $(echo "$(cpu_of "${CH_PIDS[0]}") - $h0 - $hcpu" | bc) s CPU more until none runs;" \
		"$(ch_sql 0 "SELECT sum(value) FROM system.events WHERE event = 'MergedRows'") rows merged in all," \
		"$(ch_sql 0 "SELECT count() FROM system.parts WHERE active AND database = '$DB' AND table = 'samples'") parts of samples left"
	for t in samples samples_1g; do # merged (18.16 skips an OPTIMIZE while a merge runs)
		for _ in $(seq 20); do
			ch_sql 0 "OPTIMIZE TABLE $DB.$t FINAL" >/dev/null 2>&1 || true
			[ "$(ch_sql 0 "SELECT count() - uniqExact(partition) FROM system.parts WHERE active AND database = '$DB' AND table = '$t'")" = 0 ] && break
			sleep 1
		done
	done
	ch_sql 0 "SELECT table, sum(rows), sum(bytes_on_disk), sum(data_uncompressed_bytes) FROM system.parts WHERE active AND database = '$DB' GROUP BY table ORDER BY table" |
		awk '{printf "  %-10s %12.0f rows %12.0f bytes on disk (%.0f uncompressed)\n", $1, $2, $3, $4}'
	disk=$(ch_sql 0 "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '$DB'")
	gz=$(ch_sql 0 "SELECT sum(size), count(), uniqExact(id) FROM $DB.profiles")
	roll=$(ch_sql 0 "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '$DB' AND table IN ('samples_1g', 'samples_1h', 'samples_1d')")
	awk -v d="$disk" -v g="$gz" -v r="${roll:-0}" 'BEGIN { split(g, a, "\t"); printf "storage: %.0f bytes on disk for %.0f gzip pprof bytes (%d profiles stored, %d ids): %.3f (goal <= 0.2); without the rollups (hourly, daily by device) %.3f\n", d, a[1], a[2], a[3], d / a[1], (d - r) / a[1] }'
	for p in "${cpids[@]}"; do kill "$p"; wait "$p" 2>/dev/null || true; done
fi

if [[ " $PHASES " == *" query "* ]]; then
	Q=edgeprof_day
	log_queries_on
	start_ch_collector cq "http://127.0.0.1:$(ch_http_port 0)/$Q"
	if [ "$(ch_sql 0 "SELECT count() FROM $DB.stacks" 2>/dev/null || echo 0)" = 0 ]; then
		echo "query: needs the ingest phase's stacks (PHASES=\"ingest query\")"; exit 1
	fi
	for t in functions mappings locations stacks; do
		ch_sql 0 "INSERT INTO $Q.$t SELECT * FROM $DB.$t"
	done
	sig=$(ch_sql 0 "SELECT any(sig) FROM $DB.profiles")
	main=$(ch_sql 0 "SELECT any(main_mapping) FROM $DB.profiles")
	step=$((86400000000000 / PROFILES))
	# samples' layout (the collector's): one row per profile with arrays (a new database),
	# or one per profile and stack (a CH_DIR day generated before); NROWS counts sample rows
	if [ "$(ch_sql 0 "SELECT count() FROM system.columns WHERE database = '$Q' AND table = 'samples' AND name = 'stacks'")" = 1 ]; then
		ARRAYS=1 NROWS="sum(length(stacks))" SAMPLES="$Q.samples ARRAY JOIN stacks AS stack, v"
	else
		ARRAYS=0 NROWS="count()" SAMPLES=$Q.samples
	fi
	# the stack of row k of profile p, and its values
	pick="st[1 + toUInt64(floor(length(st) * pow(((p * 131 + k * 977) % 1000) / 1000, 2)))]"
	vals="[toInt64(1 + k % 3), toInt64(10000000 * (1 + k % 3))]"
	if [ "$(ch_sql 0 "SELECT $NROWS FROM $Q.samples")" = $((PROFILES * ROWS)) ]; then
		t0=$(ch_sql 0 "SELECT min(ts) FROM $Q.profiles")
		echo "query: the day of $PROFILES profiles kept in $CH_DIR (from $t0): not generated again"
	else
	t0=$(( ($(date +%s) / 86400 - 1) * 86400 ))000000000
	s0=$(date +%s.%N)
	ch_sql 0 "INSERT INTO $Q.profiles SELECT toDate(toDateTime(intDiv(ts, 1000000000))), ts, p + 1, cityHash64(p % 10000), $sig, 'bench', 'cpu', concat('gw-', toString(p % 10000)), ['node', 'region', 'version'], [concat('gw-', toString(p % 10000)), concat('r', toString(p % 4)), concat('fw', toString(intDiv(p % 10000, 7) % 4))], '', toInt64($ROWS * 10000000), toUInt64(20000), toUInt16(0), ['samples', 'cpu'], ['count', 'nanoseconds'], '', 'cpu', 'nanoseconds', toInt64(10000000), toInt64(ts), toInt64(0), toUInt64($main), emptyArrayString() FROM (SELECT number AS p, toUInt64($t0) + number * $step AS ts FROM numbers($PROFILES))"
	if [ "$ARRAYS" = 1 ]; then # the same rows, a profile's as arrays
		ch_sql 0 "INSERT INTO $Q.samples WITH (SELECT groupArray(stack) FROM $DB.stacks) AS st SELECT toDate(toDateTime(intDiv(ts, 1000000000))), ts, cityHash64(p % 10000), $sig, p + 1, arrayMap(k -> $pick, range($ROWS)), arrayMap(k -> $vals, range($ROWS)) FROM (SELECT number AS p, toUInt64($t0) + p * $step AS ts FROM numbers($PROFILES))"
	else
		ch_sql 0 "INSERT INTO $Q.samples WITH (SELECT groupArray(stack) FROM $DB.stacks) AS st SELECT toDate(toDateTime(intDiv(ts, 1000000000))), ts, cityHash64(p % 10000), $sig, p + 1, $pick, $vals FROM (SELECT intDiv(number, $ROWS) AS p, number % $ROWS AS k, toUInt64($t0) + p * $step AS ts FROM numbers($((PROFILES * ROWS))))"
	fi
	# the group (ch__group_of: a hash of service, type and labels but node) of each (region r,
	# version v), index 4 v + r, from the collector itself: one upload of each at hour 4 v + r
	# of the day two days before, its samples_1g row read back, then that day dropped
	gday=$((t0 / 1000000000 - 2 * 86400))
	seed=$top/tests/fuzz/pprof-reader.corpus/go-cpu.gz.seed
	for g in $(seq 0 15); do
		curl -gsS --fail -o /dev/null --cacert "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" --key "$T/pki/dev-1.key" \
			--data-binary @"$seed" "https://localhost:$CC_PORT/api/0/profiles?service=bench&type=cpu&labels=node=map,region=r$((g % 4)),version=fw$((g / 4))&created_at=$((gday + g * 3600 + 60))"
	done
	gids=$(ch_sql 0 "SELECT arrayStringConcat(groupArray(toString(grp)), ',') FROM (SELECT any(grp) AS grp FROM $Q.samples_1g WHERE day = toDate($gday) GROUP BY hour ORDER BY hour)")
	[ "$(echo "$gids" | tr ',' '\n' | sort -u | wc -l)" = 16 ] || { echo "query: the 16 groups' ids not found: $gids"; exit 1; }
	for t in samples profiles samples_1g samples_1d rollup_pending; do
		ch_sql 0 "ALTER TABLE $Q.$t DROP PARTITION ID '$(date -u -d "@$gday" +%Y%m%d)'"
	done
	# the hourly rollup of those rows, as collectors send it with their batches (an hour at a
	# time: one GROUP BY of the whole day would need GBs of memory); profile p + 1's group is
	# (region p % 4, version intDiv(p % 10000, 7) % 4), as its labels above
	for h in $(seq 0 23); do
		ch_sql 0 "INSERT INTO $Q.samples_1g SELECT day, toUInt32(intDiv(ts, 3600000000000)) AS h, [$gids][1 + intDiv((profile - 1) % 10000, 7) % 4 * 4 + (profile - 1) % 4] AS g, sig, stack, sum(v[1]), sum(v[2]), sum(v[3]), sum(v[4]) FROM $SAMPLES WHERE ts >= $t0 + $h * 3600000000000 AND ts < $t0 + ($h + 1) * 3600000000000 AND length(v) <= 4 GROUP BY day, h, g, sig, stack ORDER BY g, sig, h, stack"
	done
	s1=$(date +%s.%N)
	echo "query: $(ch_sql 0 "SELECT count() FROM $Q.profiles") profiles, $(ch_sql 0 "SELECT $NROWS FROM $Q.samples") sample rows generated in $(echo "$s1 - $s0" | bc) s" \
		"(and their hourly rollup: $(ch_sql 0 "SELECT count() FROM $Q.samples_1g") rows);" \
		"$(ch_sql 0 "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '$Q'") bytes on disk"
	# the rollup's parts merged, as a day of ingest leaves them (merges run as rows arrive)
	s0=$(date +%s.%N)
	ch_sql 0 "OPTIMIZE TABLE $Q.samples_1g FINAL"
	echo "query: samples_1g merged in $(echo "$(date +%s.%N) - $s0" | bc) s: $(ch_sql 0 "SELECT count() FROM $Q.samples_1g") rows," \
		"$(ch_sql 0 "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '$Q' AND table = 'samples_1g'") bytes on disk"
	fi
	ports=("$CC_PORT")
	if [ "${RAW_PEER:-1}" = 1 ]; then # the same queries on raw rows only: the peer
		start_ch_collector cr "http://127.0.0.1:$(ch_http_port 0)/$Q" --rollup-seconds 0
		ports+=("$CC_PORT")
	fi
	from=$((t0 / 1000000000)) to=$((t0 / 1000000000 + 86400))
	sel=$(printf '%s' '{version="fw1"}' | sed 's/{/%7B/g; s/}/%7D/g; s/"/%22/g; s/=/%3D/g')
	top50() { # port from to: the times of 4 runs of the top-50 of fw1
		for _ in 1 2 3 4; do
			t=$(date +%s.%N)
			op -o "$T/top.pb.gz" -D "$T/top.h" "https://localhost:$1/api/0/profiles/merge?type=cpu&from=$2&to=$3&query=$sel"
			"$EP" top -n 50 "$T/top.pb.gz" >"$T/top.txt"
			echo "$(date +%s.%N) - $t" | bc
		done
	}
	flame() { # port from to
		for _ in 1 2 3 4; do
			op -o "$T/flame.json" -w '%{time_total}\n' "https://localhost:$1/api/0/render?type=cpu&from=$2&to=$3&format=flamebearer"
		done
	}
	qlog() { # what ClickHouse did for the last 3 requests since $1 (unix time): medians
		ch_sql 0 "SYSTEM FLUSH LOGS" >/dev/null
		for what in "merge:SELECT stack, [s%' OR query LIKE 'SELECT stack, sumForEach%" "series:SELECT series, sig, any(%" "series sums:SELECT series, sig, count()%" \
			"series heads:SELECT series, sig, service%"; do
			ch_sql 0 "SELECT read_rows, read_bytes, memory_usage, query_duration_ms, ProfileEvents.Values[indexOf(ProfileEvents.Names, 'UserTimeMicroseconds')] FROM system.query_log WHERE type = 2 AND event_time >= toDateTime($1) AND (query LIKE '${what#*:}') ORDER BY event_time DESC LIMIT 3" |
				sort -k5 -g | awk -v w="${what%%:*}" 'NR == 2 {printf "    clickhouse %s queries (median of 3 by CPU): %.1f M rows read, %.0f MB, %.0f MB memory, %d ms, %.2f s user CPU\n", w, $1 / 1e6, $2 / 1e6, $3 / 1e6, $4, $5 / 1e6}'
		done
	}
	for port in "${ports[@]}"; do
		how=rollup
		[ "$port" = "${ports[0]}" ] || how="raw rows (--rollup-seconds 0)"
		for range in "$from $to the day" "$((from + 1800)) $((to - 1800)) the day less its first and last half hour"; do
			set -- $range
			r0=$1 r1=$2
			shift 2
			q0=$(date +%s)
			top50 "$port" "$r0" "$r1" >"$T/top.times"
			tail -n 3 "$T/top.times" | median3 | awk -v n="$(grep -i '^x-edgeprof-profiles' "$T/top.h" | tr -dc 0-9)" -v how="$how" -v what="$*" \
				'{printf "query (%s, %s): top-50 functions of version fw1 (%d profiles): %.2f s (median of 3, warm; goal <= 2 s)\n", how, what, n, $1}'
			qlog "$q0"
			cp "$T/top.txt" "$T/top.$port.$r0"
			q0=$(date +%s)
			flame "$port" "$r0" "$r1" | tail -n 3 | median3 | awk -v how="$how" -v what="$*" \
				'{printf "query (%s, %s): flame graph (flamebearer) of the fleet: %.2f s (median of 3, warm; goal <= 3 s)\n", how, what, $1}'
			qlog "$q0"
			cp "$T/flame.json" "$T/flame.$port.$r0"
		done
	done
	sed -n '/flat%/,$p' "$T/top.${ports[0]}.$from" | head -n 6 | sed 's/^/  /'
	if [ ${#ports[@]} = 2 ]; then
		for r0 in "$from" "$((from + 1800))"; do
			cmp -s "$T/top.${ports[0]}.$r0" "$T/top.${ports[1]}.$r0" &&
				cmp -s "$T/flame.${ports[0]}.$r0" "$T/flame.${ports[1]}.$r0" ||
				{ echo "query: the rollup's answers differ from the raw rows' (from $r0)"; exit 1; }
		done
		echo "query: the rollup's top-50 and flame graphs are the raw rows' (byte for byte)"
	fi
	echo "load: $(uptime)"
fi
if [ -n "${KEEP:-}" ]; then # look around: ClickHouse and the last collector stay up KEEP seconds
	echo "kept: $T, ClickHouse http://127.0.0.1:$(ch_http_port 0)/, collector port ${CC_PORT:-}"
	sleep "$KEEP"
fi
[ -z "${CH_DIR:-}" ] || ch_stop 0 # a clean stop: the kept data dir is reused
