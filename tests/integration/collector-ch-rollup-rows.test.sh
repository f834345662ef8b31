#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# collector-ch-rollup.test.sh on a database whose samples an older collector made as one row
# per (profile, stack): the collector keeps that layout (reads and writes), every answer the
# ring's. ~20 s.
CH_SAMPLES_ROWS=1 exec "$(dirname "$0")/collector-ch-rollup.test.sh"
