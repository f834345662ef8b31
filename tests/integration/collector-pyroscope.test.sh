#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pyroscope and Alloy push to us: the Node SDK's exact request (query string, octet-stream gzip
# body, Bearer token on the plain-HTTP listener), a multipart/form-data upload with nanosecond
# times, and Grafana Alloy's Connect push (PushRequest protobuf) over mutual TLS. Each is stored
# with its labels and found by a selector; merge of what matches reads back.
. "$(dirname "$0")/../lib/collector-lib.sh"

make_pki
"$PPROF_TOOL" build "$T/p.pb.gz" >/dev/null || fail "pprof-tool build"
TOKEN=pyroscope-token-42
start_collector --http-listen 127.0.0.1:0 --http-token "$TOKEN"
H=http://127.0.0.1:$HTTP_PORT
now=$(date +%s)

# 1. The Node SDK: name=app{region=eu,host=web-1}, from/until in seconds.
code=$(curl -sS -o "$T/r1" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
	-H 'Content-Type: application/octet-stream' --data-binary @"$T/p.pb.gz" \
	"$H/ingest?format=pprof&from=$((now - 10))&until=$now&name=nodeapp%7Bregion%3Deu%2Chost%3Dweb-1%7D&spyName=nodespy&sampleRate=17")
[ "$code" = 200 ] || fail "Node SDK ingest: $code $(cat "$T/r1")"

# 2. multipart/form-data with a profile part, times in nanoseconds (Go SDK style).
code=$(curl -sS -o "$T/r2" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
	-F "profile=@$T/p.pb.gz;type=application/octet-stream" \
	-F 'sample_type_config={"cpu":{"units":"samples"}};type=application/json' \
	"$H/ingest?name=goapp.cpu%7Bregion%3Dus%7D&from=$(( (now - 10) * 1000000000 ))&until=${now}000000000")
[ "$code" = 200 ] || fail "multipart ingest: $code $(cat "$T/r2")"

# Unsupported format and a bad name are refused clearly.
code=$(curl -sS -o "$T/r3" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
	--data-binary 'foo;bar 1' "$H/ingest?name=x&format=folded")
[ "$code" = 422 ] || fail "folded format: $code"
code=$(curl -sS -o "$T/r4" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
	--data-binary @"$T/p.pb.gz" "$H/ingest?format=pprof")
[ "$code" = 400 ] || fail "missing name: $code"

# 3. Alloy's pyroscope.write: push.v1.PusherService/Push, application/proto, over mTLS.
/usr/bin/python3 - "$T/p.pb.gz" "$T/push.bin" <<'PY'
import sys
def varint(n):
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
def fld(num, payload):
    return varint((num << 3) | 2) + varint(len(payload)) + payload
def label(k, v):
    return fld(1, k.encode()) + fld(2, v.encode())
prof = open(sys.argv[1], "rb").read()
series = (fld(1, label("__name__", "process_cpu")) + fld(1, label("service_name", "alloyapp")) +
          fld(1, label("env", "prod")) + fld(1, label("device", "spoof")) +
          fld(2, fld(1, prof) + fld(2, b"sample-1")) + fld(2, fld(1, prof)))
open(sys.argv[2], "wb").write(fld(1, series))
PY
out=$(dcurl dev-1 -H 'Content-Type: application/proto' -H 'Connect-Protocol-Version: 1' \
	--data-binary @"$T/push.bin" "$(URL /push.v1.PusherService/Push)")
echo "$out" | grep -q 'HTTP 200' || fail "Alloy push: $out"
out=$(dcurl dev-1 -H 'Content-Type: application/proto' --data-binary 'not protobuf at all' \
	"$(URL /push.v1.PusherService/Push)")
echo "$out" | grep -q 'HTTP 400' || fail "garbage push accepted: $out"

# Found by selectors, with their labels.
list() { dcurl op "$(URL "/api/0/profiles?from=2000-01-01&query=$1")"; }
out=$(list 'nodeapp%7Bregion%3D%22eu%22%2Chost%3D~%22web-.*%22%7D')
echo "$out"
echo "$out" | grep -q '"service":"nodeapp"' || fail "Node SDK profile not found by selector"
echo "$out" | grep -q '"device":""' || fail "plain-HTTP profile has a device"
# placed at the SDK's from time, not the profile's
echo "$out" | grep -q "\"created_at\":\"$(date -u -d @$((now - 10)) +%Y-%m-%dT%H:%M:%S)" ||
	fail "from= not used as the profile time"
out=$(list 'goapp.cpu%7Bregion%3D%22us%22%7D')
echo "$out" | grep -q '"service":"goapp.cpu"' || fail "multipart profile not found"
out=$(list 'alloyapp%7Benv%3D%22prod%22%2Cdevice%3D%22dev-1%22%7D')
echo "$out"
[ "$(echo "$out" | grep -o '"id"' | wc -l)" = 2 ] || fail "Alloy push: want 2 profiles"
echo "$out" | grep -q '"type":"cpu"' || fail "Alloy __name__ process_cpu is not type cpu"
echo "$out" | grep -q 'spoof' && fail "Alloy series overrode the device"
out=$(list 'nodeapp%7Bregion%3D%22us%22%7D')
echo "$out" | grep -q '"id"' && fail "selector matched the wrong region"

code=$(dcurl op -o "$T/m.pb.gz" "$(URL '/api/0/profiles/merge?from=2000-01-01&query=%7Bregion%3D~%22eu%7Cus%22%7D')" | tail -n 1)
[ "$code" = "HTTP 200" ] || fail "merge: $code"
"$PPROF_TOOL" check "$T/m.pb.gz" || fail "merged profile does not read"
stop_collector
echo "collector pyroscope/alloy ingest: ok"
