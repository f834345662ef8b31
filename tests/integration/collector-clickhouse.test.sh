#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ClickHouse backend against the ring file, with a real clickhouse-server (Debian's 18.16)
# on loopback: the same 30 profiles (3 devices, 2 regions, varied stacks) go through the real
# mTLS API into a ring-file collector and a ClickHouse collector; listings, merges (whole,
# by selector, by time range: go tool pprof's flat/cum per function via pprof-tool), the
# folded flame graph of /api/0/render and the timeline must be the same from both, and one
# profile read back by id must have the values it was uploaded with. Then ClickHouse is killed with SIGKILL while 4
# clients upload and restarted 2 s later: every acknowledged profile is in ClickHouse, once,
# with its samples. --retention-days drops a 40-day-old day and nothing newer. Last, one upload
# retried on three collectors (one after another's kill -9) is stored once. The same metrics
# rules (--metrics-rule) count the same series on both backends. ~25 s.
. "$(dirname "$0")/../lib/collector-lib.sh"
. "$(dirname "$0")/../lib/clickhouse-lib.sh"
[ -x "$LOAD" ] || { echo "collector-load not built (make all-tests)"; exit 77; }
ch_need --clickhouse

make_pki
for d in dev-2 dev-3; do "$EP" certs device "$T/pki" "$d" >/dev/null || fail "certs $d"; done
make_bases 3
"$PPROF_TOOL" build "$T/built.pb.gz" >/dev/null || fail "pprof-tool build"
n=30
for i in $(seq 0 $((n - 1))); do
	"$PPROF_TOOL" vary "$T/base$((i % 3)).pb.gz" "$T/v$i.pb.gz" "$i" >/dev/null 2>&1 ||
		fail "pprof-tool vary"
done

ch_start 0
CHURL=http://127.0.0.1:$(ch_http_port 0)/edgeprof_test
# Metrics rules are evaluated in store/store.c for every backend: the same counters from both.
RULES=(--metrics-rule 'r_fn=gw function=~"func_1.?" by (region, device)'
       --metrics-rule 'r_all=gw{type="cpu"} by (version)')
start_collector "${RULES[@]}"
start_ch_collector chc "$CHURL" --ch-batch-ms 50 "${RULES[@]}"

base=$(( $(date +%s) / 60 * 60 - 3600 ))
upload() { # port device file key labels time
	curl -sS --fail --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/$2.crt" \
		--key "$T/pki/$2.key" --data-binary @"$3" -H "X-Edgeprof-Key: $4" \
		"https://localhost:$1/api/0/profiles?service=gw&type=cpu&labels=$5&created_at=$6" \
		>/dev/null || fail "upload $4 to port $1"
}
for i in $(seq 0 $((n - 1))); do
	dev=dev-$((i % 3 + 1)) labels="version=1.$((i % 4)),region=$( ((i % 2)) && echo eu || echo us)"
	upload "$TLS_PORT" "$dev" "$T/v$i.pb.gz" "k$i" "$labels" $((base + 10 * i)) &
	up=$!
	upload "$CC_PORT" "$dev" "$T/v$i.pb.gz" "k$i" "$labels" $((base + 10 * i))
	wait "$up" || fail "upload k$i to the ring"
done
upload "$TLS_PORT" dev-1 "$T/built.pb.gz" kb region=eu $((base + 1000))
upload "$CC_PORT" dev-1 "$T/built.pb.gz" kb region=eu $((base + 1000))
rules() { # port: the rules' series, sorted
	curl -sS --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		"https://localhost:$1/metrics" | grep '^r_' | sort
}
rules "$TLS_PORT" >"$T/rules.ring"
rules "$CC_PORT" >"$T/rules.ch"
[ "$(wc -l <"$T/rules.ring")" -ge 8 ] || fail "metrics rules: $(cat "$T/rules.ring")"
cmp -s "$T/rules.ring" "$T/rules.ch" || { diff "$T/rules.ring" "$T/rules.ch"; fail "rules differ"; }
echo "metrics rules: the same $(wc -l <"$T/rules.ring") series from both backends"
# 40 days old (before every query below): for the retention check at the end
upload "$CC_PORT" dev-1 "$T/v0.pb.gz" kold region=eu $((base - 40 * 86400))

get() { # port path-and-query out: operator GET, the headers to out.h
	curl -gsS --fail --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" \
		--key "$T/pki/op.key" -D "$3.h" -o "$3" "https://localhost:$1$2" ||
		fail "GET $2 from port $1"
}
enc() { printf '%s' "$1" | sed 's/{/%7B/g; s/}/%7D/g; s/"/%22/g; s/=/%3D/g; s/~/%7E/g; s/,/%2C/g'; }

# Listings: the same profiles, newest first, with the same metadata (ids differ).
for q in "from=$base" "query=$(enc 'gw{region="eu"}')&from=$base" "from=$((base + 100))&to=$((base + 200))"; do
	get "$TLS_PORT" "/api/0/profiles?$q&limit=1000" "$T/l.ring"
	get "$CC_PORT" "/api/0/profiles?$q&limit=1000" "$T/l.ch"
	for f in ring ch; do sed 's/"id":"[0-9]*"//g' "$T/l.$f" >"$T/l.$f.x"; done
	cmp -s "$T/l.ring.x" "$T/l.ch.x" || { diff "$T/l.ring.x" "$T/l.ch.x" | head; fail "list $q differs"; }
done
echo "listings: same ($(grep -o '"service"' "$T/l.ring" | wc -l) profiles in the last)"

# Merges and flame graphs: the same functions and values.
checks=0
for q in "" "$(enc 'gw{region="eu"}')" "$(enc 'gw{device=~"dev-[12]",version!="1.3"}')" \
	 "$(enc '{}')&from=$((base + 50))&to=$((base + 150))"; do
	qs="type=cpu&from=$base&query=$q"
	case $q in *from=*) qs="type=cpu&query=$q" ;; esac
	get "$TLS_PORT" "/api/0/profiles/merge?$qs" "$T/m.ring"
	get "$CC_PORT" "/api/0/profiles/merge?$qs" "$T/m.ch"
	"$PPROF_TOOL" flat "$T/m.ring" >"$T/f.ring" || fail "pprof-tool flat (ring)"
	"$PPROF_TOOL" flat "$T/m.ch" >"$T/f.ch" || fail "pprof-tool flat (clickhouse)"
	[ -s "$T/f.ring" ] || fail "empty merge for $qs"
	cmp -s "$T/f.ring" "$T/f.ch" || { diff "$T/f.ring" "$T/f.ch" | head; fail "merge $qs differs"; }
	pr=$(grep -i '^x-edgeprof-profiles' "$T/m.ring.h" | tr -dc 0-9)
	pc=$(grep -i '^x-edgeprof-profiles' "$T/m.ch.h" | tr -dc 0-9)
	[ "$pr" = "$pc" ] || fail "merge $qs: $pr profiles from the ring, $pc from ClickHouse"
	get "$TLS_PORT" "/api/0/render?format=folded&$qs" "$T/r.ring"
	get "$CC_PORT" "/api/0/render?format=folded&$qs" "$T/r.ch"
	sort "$T/r.ring" >"$T/r.ring.s" && sort "$T/r.ch" >"$T/r.ch.s"
	cmp -s "$T/r.ring.s" "$T/r.ch.s" || { diff "$T/r.ring.s" "$T/r.ch.s" | head; fail "folded $qs differs"; }
	checks=$((checks + 1))
	echo "merge $qs: $pr profiles, $(wc -l <"$T/f.ch") functions, $(wc -l <"$T/r.ch") stacks: same"
done

# Timelines (the UI's): the same totals per bucket (ClickHouse sums them itself).
for q in "from=$base&to=$((base + 400))&step=60" "query=$(enc 'gw{region="eu"}')&from=$base&to=$((base + 400))&step=30"; do
	get "$TLS_PORT" "/api/0/timeline?type=cpu&$q" "$T/t.ring"
	get "$CC_PORT" "/api/0/timeline?type=cpu&$q" "$T/t.ch"
	cmp -s "$T/t.ring" "$T/t.ch" || { cat "$T/t.ring" "$T/t.ch"; fail "timeline $q differs"; }
	grep -q '"profiles":[1-9]' "$T/t.ch" || fail "timeline $q: empty ($(cat "$T/t.ch"))"
done
echo "timelines: same ($(cat "$T/t.ch" | head -c 120)...)"

# One profile by id: what was uploaded (values, functions; ClickHouse rebuilds the pprof).
get "$CC_PORT" "/api/0/profiles?from=$((base + 1000))&limit=1" "$T/l1"
id=$(grep -o '"id":"[0-9]*"' "$T/l1" | head -n 1 | tr -dc 0-9)
get "$CC_PORT" "/api/0/profiles/$id" "$T/one"
"$PPROF_TOOL" flat "$T/built.pb.gz" >"$T/f.orig"
"$PPROF_TOOL" flat "$T/one" >"$T/f.one" || fail "the profile read by id does not decode"
cmp -s "$T/f.orig" "$T/f.one" || { diff "$T/f.orig" "$T/f.one"; fail "profile $id differs"; }
echo "by id: $id as uploaded"

# kill -9 of ClickHouse under load: every acknowledged profile is there once, with samples.
"$LOAD" --url "https://localhost:$CC_PORT" --ca "$T/pki/ca.crt" --cert "$T/pki/dev-2.crt" \
	--key "$T/pki/dev-2.key" --file "$T/v1.pb.gz" --clients 4 --seconds 8 \
	--prefix crash --ack-log "$T/ack" >"$T/load.log" 2>&1 &
lpid=$!
sleep 2
before=$(wc -l <"$T/ack")
ch_kill 0
sleep 2
ch_start 0
wait "$lpid"
acked=$(wc -l <"$T/ack")
[ "$acked" -gt $((before + 10)) ] || { cat "$T/load.log"; fail "too few uploads acknowledged after the restart ($before before, $acked in all)"; }
ids=$(awk '{print $1}' "$T/ack" | paste -sd, -)
got=$(ch_sql 0 "SELECT count(), uniqExact(id) FROM edgeprof_test.profiles WHERE id IN ($ids)")
[ "$got" = "$acked	$acked" ] || fail "after kill -9 of ClickHouse: $acked acknowledged, ClickHouse has (rows, ids) $got"
with=$(ch_sql 0 "SELECT uniqExact(profile) FROM edgeprof_test.samples WHERE profile IN ($ids)")
[ "$with" = "$acked" ] || fail "$acked acknowledged, $with with samples"
# every profile of the load is the same file: each has the same number of stacks (a batch
# applied twice after a lost answer would double some; samples is a row per profile)
per=$(ch_sql 0 "SELECT uniqExact(c), any(c) FROM (SELECT profile, sum(length(stacks)) c FROM edgeprof_test.samples WHERE profile IN ($ids) GROUP BY profile)")
[ "${per%%	*}" = 1 ] || fail "acknowledged profiles with different sample counts (kinds, count): $per"
echo "kill -9 of ClickHouse under load: $acked acknowledged ($before before the kill), all stored once with their samples"
echo "$(grep 'clickhouse: INSERT' "$T/chc.log" | head -n 1)"
# Retention: a collector with --retention-days 30 drops the day of the 40-day-old profile (its
# samples too) and nothing newer.
old=$(ch_sql 0 "SELECT count() FROM edgeprof_test.profiles WHERE key = 'kold'")
[ "$old" = 1 ] || fail "the old profile is not stored ($old)"
all=$(ch_sql 0 "SELECT count() FROM edgeprof_test.profiles")
start_ch_collector chr "$CHURL" --retention-days 30
for _ in $(seq 100); do
	[ "$(ch_sql 0 "SELECT count() FROM edgeprof_test.profiles WHERE key = 'kold'")" = 0 ] && break
	sleep 0.1
done
[ "$(ch_sql 0 "SELECT count() FROM edgeprof_test.profiles WHERE key = 'kold'")" = 0 ] ||
	fail "--retention-days 30 kept a 40-day-old profile"
[ "$(ch_sql 0 "SELECT count() FROM edgeprof_test.samples WHERE ts < $(((base - 30 * 86400) * 1000000000))")" = 0 ] ||
	fail "--retention-days 30 kept old samples"
[ "$(ch_sql 0 "SELECT count() FROM edgeprof_test.profiles")" = $((all - 1)) ] ||
	fail "retention dropped more than the old day"
grep 'retention: dropped' "$T/chr.log" | head -n 2

# A retry that reaches another collector (a load balancer) or this one after a restart is not
# stored twice: the id of a keyed upload is the key's, looked up before a batch's samples go.
port1=$CC_PORT
upload "$port1" dev-3 "$T/v5.pb.gz" lb-1 region=eu $((base + 500))
start_ch_collector chd "$CHURL" --ch-batch-ms 50
upload "$CC_PORT" dev-3 "$T/v5.pb.gz" lb-1 region=eu $((base + 500))
kill -9 "$CC_PID"
start_ch_collector che "$CHURL" --ch-batch-ms 50
upload "$CC_PORT" dev-3 "$T/v5.pb.gz" lb-1 region=eu $((base + 500))
got=$(ch_sql 0 "SELECT count(), uniqExact(id) FROM edgeprof_test.profiles WHERE key = 'lb-1'")
[ "$got" = "1	1" ] || fail "one upload retried on 3 collectors: (rows, ids) $got"
rows=$(ch_sql 0 "SELECT sum(length(stacks)) FROM edgeprof_test.samples WHERE profile IN (SELECT id FROM edgeprof_test.profiles WHERE key = 'lb-1')")
want=$(ch_sql 0 "SELECT sum(length(stacks)) FROM edgeprof_test.samples WHERE profile IN (SELECT id FROM edgeprof_test.profiles WHERE key = 'k5')")
[ "$rows" = "$want" ] || fail "the retried upload has $rows sample rows, the same profile stored once $want"
echo "a retry on another collector and after a restart: stored once ($rows sample rows)"
echo "collector-clickhouse: ok ($checks merges and flame graphs equal to the ring's)"
