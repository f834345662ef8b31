#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Crash safety of the real collector: TRIALS (default 100) times, 4 keep-alive mTLS clients
# stream uploads (each acknowledged id is logged by the client before its next request) and the
# collector is killed with SIGKILL at a random moment. After the restart every acknowledged
# profile is served byte-identical, a retried key gets its old id back (nothing stored twice),
# and no stored profile is torn: every profile listed at the end is one of the uploaded files.
# Trials alternate fsync policies: every record (--fsync-ms 0) and group commit (--fsync-ms 5);
# concurrent clients make records finish their writes out of order under both.
. "$(dirname "$0")/../lib/collector-lib.sh"
[ -x "$LOAD" ] || { echo "collector-load not built (make all-tests)"; exit 77; }
TRIALS=${TRIALS:-100}

make_pki
for i in 0 1 2 3 4; do # five distinct payloads, 2-12 KB
	"$PPROF_TOOL" encode "$T/p$i.pb.gz" $((100 + 150 * i)) $((10 + 20 * i)) $((4 + 2 * i)) \
		>/dev/null 2>&1 || fail "pprof-tool encode"
done
md5sum "$T"/p?.pb.gz | awk '{print $1}' | sort >"$T/sources.md5"
RING_SIZE=16M
fsync_of() { echo $(( $1 % 2 ? 0 : 5 )); } # trial -> the policy it runs under
start_collector --fsync-ms "$(fsync_of 1)"
acked=0 verified=0 empty=0

verify_trial() { # trial: every acknowledged id of that trial, fetched in one keep-alive curl
	local t=$1 file=$T/p$(( $1 % 5 )).pb.gz n=0
	[ -s "$T/ack.$t" ] || { empty=$((empty + 1)); return 0; }
	: >"$T/curl.cfg"
	while read -r id key; do
		printf 'url = "https://localhost:%s/api/0/profiles/%s"\noutput = "%s/got.%s"\n' \
			"$TLS_PORT" "$id" "$T" "$id" >>"$T/curl.cfg"
		n=$((n + 1))
	done <"$T/ack.$t"
	curl -sS --fail --max-time 120 --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" \
		--key "$T/pki/op.key" -K "$T/curl.cfg" || fail "trial $t: an acknowledged profile is missing"
	want=$(md5sum <"$file" | awk '{print $1}')
	got=$(md5sum "$T"/got.* | awk '{print $1}' | sort -u)
	[ "$got" = "$want" ] || fail "trial $t: an acknowledged profile differs from what was sent"
	[ "$(ls "$T"/got.* | wc -l)" = "$n" ] || fail "trial $t: missing answers"
	rm -f "$T"/got.*
	acked=$((acked + n))
	verified=$((verified + n))
	# the last acknowledged key, retried, is a no-op that answers the same id
	read -r id key < <(tail -n 1 "$T/ack.$t")
	out=$(dcurl dev-1 --data-binary @"$file" -H "X-Edgeprof-Key: $key" \
		"$(URL '/api/0/profiles?service=bench&type=cpu&labels=client=0')")
	echo "$out" | grep -q "\"id\":\"$id\"" || fail "trial $t: retry of $key got another id: $out"
}

for t in $(seq 1 "$TRIALS"); do
	"$LOAD" --url "https://localhost:$TLS_PORT" --ca "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" \
		--key "$T/pki/dev-1.key" --file "$T/p$((t % 5)).pb.gz" --clients 4 --seconds 30 \
		--prefix "t$t" --ack-log "$T/ack.$t" >"$T/load.$t" 2>&1 &
	lpid=$!
	sleep "0.$(printf '%02d' $((RANDOM % 25 + 2)))"
	kill -9 "$CPID"
	wait "$CPID" 2>/dev/null
	CPID=
	wait "$lpid"
	start_collector --fsync-ms "$(fsync_of $((t + 1)))"
	verify_trial "$t"
	[ $((t % 10)) = 0 ] && echo "trial $t: $acked acknowledged so far, all present and identical"
done
[ "$acked" -gt $((TRIALS * 5)) ] || fail "too few acknowledged uploads ($acked) to mean anything"

# No torn record served: everything listed is byte-identical to one of the sources.
dcurl op "$(URL '/api/0/profiles?from=2000-01-01&limit=100000')" >"$T/list"
: >"$T/curl.cfg"
for id in $(grep -o '"id":"[0-9]*"' "$T/list" | tr -dc '0-9\n'); do
	printf 'url = "https://localhost:%s/api/0/profiles/%s"\noutput = "%s/all.%s"\n' \
		"$TLS_PORT" "$id" "$T" "$id" >>"$T/curl.cfg"
done
curl -sS --fail --max-time 300 --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" \
	--key "$T/pki/op.key" -K "$T/curl.cfg" || fail "a listed profile cannot be read"
bad=$(md5sum "$T"/all.* | awk '{print $1}' | sort -u | comm -23 - "$T/sources.md5")
[ -z "$bad" ] || fail "served a profile that is not one of the uploads"
total=$(ls "$T"/all.* | wc -l)
corrupt=$(metric ring_corrupt_records_total)
stop_collector
echo "collector crash safety: ok ($TRIALS kill -9 trials; after each restart all of its" \
	"acknowledged profiles were present and identical, $acked in all; $total stored at the end" \
	"(the ring wraps), $corrupt torn records skipped, $empty trials killed" \
	"before the first ack)"
