#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Strings from devices (issue 24 items 4, 5 and the smaller ones): invalid UTF-8 in a label or a
# function name gives valid JSON (U+FFFD) while the stored pprof keeps its bytes; a newline in a
# profile's strings cannot forge a log line; a percent-encoded comma stays inside a profefe label
# value; a profile whose period type cannot merge is skipped (and counted in the answer, a pprof
# comment and /metrics) instead of failing the whole merge.
. "$(dirname "$0")/../lib/collector-lib.sh"

make_pki
A="/usr/bin/python3 $(dirname "$0")/../lib/collector-attack.py"
start_collector
POST="https://localhost:$TLS_PORT/api/0/profiles?type=cpu"
$A pprof "$T/ok.pb.gz" main || fail "pprof"
$A pprof "$T/bad.pb.gz" "b'f\xff\xfe\xc3\nedgeprof-collector: warning: refused TLS client forged'" ||
	fail "pprof"
$A pprof "$T/odd.pb.gz" main samples count wall seconds || fail "pprof"
up() { # FILE QUERY...
	dcurl dev-1 --data-binary @"$1" "$POST&$2" | tail -n 1
}
[ "$(up "$T/ok.pb.gz" 'service=s&labels=k=%FF%FE%C3,c=a%2Cb%3Dc&created_at=2026-01-01T00:00:00')" = "HTTP 200" ] ||
	fail "upload with odd label bytes"
[ "$(up "$T/bad.pb.gz" 'service=s&created_at=2026-01-01T00:00:01')" = "HTTP 200" ] || fail "upload"
[ "$(up "$T/odd.pb.gz" 'service=s&created_at=2026-01-01T00:00:02')" = "HTTP 200" ] || fail "upload"
[ "$(up "$T/ok.pb.gz" 'service=s&created_at=2026-01-01T00:00:03')" = "HTTP 200" ] || fail "upload"

# JSON parsers that insist on UTF-8 read every answer.
for path in '/api/0/profiles?from=2000-01-01' \
	'/api/0/render?from=2000-01-01&to=2027-01-01&format=json&query=s' \
	'/api/0/render?from=2000-01-01&to=2027-01-01&format=flamebearer&query=s'; do
	dcurl op -o "$T/answer.json" "$(URL "$path")" >"$T/code" || fail "GET $path"
	/usr/bin/python3 -c '
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8", "strict"))
print(sys.argv[2], "parses;", "U+FFFD" if "\ufffd" in json.dumps(d, ensure_ascii=False) else "")
' "$T/answer.json" "$path" || fail "invalid JSON from $path"
done
grep -q '"value":"a,b=c"' <(dcurl op "$(URL '/api/0/profiles?from=2000-01-01')") ||
	fail "percent-encoded comma not kept in a label value"
grep -q $'\xef\xbf\xbd' "$T/answer.json" || fail "no U+FFFD for the invalid bytes"
# The stored pprof keeps the original bytes.
id=$(dcurl op "$(URL '/api/0/profiles?from=2000-01-01')" | grep -o '"id":"[0-9]*"' | sed -n 3p |
	tr -dc 0-9)
dcurl op -o "$T/back.pb.gz" "$(URL "/api/0/profiles/$id")" >/dev/null
cmp -s "$T/back.pb.gz" "$T/bad.pb.gz" || fail "stored profile $id changed"

# The odd profile is skipped, the merge answers (it was a 400 for the whole service).
out=$(dcurl op -D "$T/h" -o "$T/m.pb.gz" \
	"$(URL '/api/0/profiles/merge?type=cpu&from=2000-01-01&to=2027-01-01&query=s')")
echo "merge: $out; $(grep -i x-edgeprof "$T/h" | tr -d '\r' | tr '\n' ' ')"
echo "$out" | grep -q 'HTTP 200' || fail "one odd profile failed the merge"
grep -qi 'X-Edgeprof-Skipped: 1' "$T/h" || fail "skipped profile not counted in the answer"
"$PPROF_TOOL" dump "$T/m.pb.gz" | grep -q 'comment.*1 profile skipped' ||
	"$PPROF_TOOL" dump "$T/m.pb.gz" | grep -qa '1 profile skipped' || fail "no pprof comment"
[ "$(metric merge_skipped_total)" -ge 1 ] || fail "skip not in /metrics"
grep -q '"skipped":1' <(dcurl op "$(URL '/api/0/render?from=2000-01-01&to=2027-01-01&format=json&query=s')") ||
	fail "skip not in the render answer (the UI's count)"

# An odd profile dated first does not make it the kind every other profile is skipped for.
[ "$(up "$T/odd.pb.gz" 'service=s2&created_at=2026-01-01T00:00:00')" = "HTTP 200" ] || fail "upload"
for i in 1 2 3; do
	[ "$(up "$T/ok.pb.gz" "service=s2&created_at=2026-01-01T00:00:0$i")" = "HTTP 200" ] ||
		fail "upload"
done
dcurl op -D "$T/h2" -o "$T/m2.pb.gz" \
	"$(URL '/api/0/profiles/merge?type=cpu&from=2000-01-01&to=2027-01-01&query=s2')" >/dev/null
echo "odd first: $(grep -i x-edgeprof "$T/h2" | tr -d '\r' | tr '\n' ' ')"
grep -qi 'X-Edgeprof-Profiles: 3' "$T/h2" && grep -qi 'X-Edgeprof-Skipped: 1' "$T/h2" ||
	fail "the first-dated odd profile decided the merge"

# No line of the log starts with a forged prefix: each event stayed on its line.
if grep -n 'forged' "$T/collector.log" | grep -v ':edgeprof-collector: [a-z]*: .*\\x0a'; then
	grep -q '^edgeprof-collector: warning: refused TLS client forged' "$T/collector.log" &&
		fail "a device string forged a log line"
fi
echo PASS
