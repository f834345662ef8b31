#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The layers of docs/architecture.md hold: no include climbs a layer, no include cycle, the
# front folders hold only their front files, no .c file over 1,800 lines (tests/lib/layers.py).
# Then the check itself is shown to fail: an upward include added to a copy of the tree.
set -eu
top=${EP_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
/usr/bin/python3 "$top/tests/lib/layers.py" "$top"
copy=$(mktemp -d /tmp/edgeprof-layers.XXXXXX)
trap 'rm -rf "$copy"' EXIT
(cd "$top" && tar cf - docs port elf pprof agent bpf store tools) | tar xf - -C "$copy"
echo '#include "agent/daemon/pull.h"' >>"$copy/port/clock.c"
if /usr/bin/python3 "$top/tests/lib/layers.py" "$copy" >"$copy/out"; then
	echo "an include from port/ up to agent/daemon/ was not found"; exit 1
fi
grep -q 'port/clock.c: includes agent/daemon/pull.h' "$copy/out"
echo "an upward include fails the check: $(grep -c . "$copy/out") finding(s)"
