# SPDX-License-Identifier: MIT
# store/ — fleet regression detection (GET /api/0/regressions): the statistics are I/O-free in
# pprof/view/regress.c, the per-device merges through the store front in store/api/regress-store.c.
store-regress-y := pprof/view/regress.o pprof/view/stacks.o store/api/regress-store.o \
		   store/api/api-regress.o store/api/regress-rules.o
edgeprof-collector-objs   += $(store-regress-y)
edgeprof-collector-ldlibs += -lm

# The statistics against scipy's values, shares, BH, simulated comparisons (every board).
unit-tests-y         += regress
regress-test-objs     = pprof/view/regress.o pprof/view/stacks.o
regress-test-ldlibs   = -lm

# The simulated staged roll-out of the integration test and the benchmark (not installed).
regress-fleet-objs   = tests/drivers/regress-fleet.o pprof/view/regress.o pprof/view/stacks.o \
		       store/api/regress-store.o $(store-core-y) $(pprof-y) $(port-y)
regress-fleet-ldlibs = $(pprof-ldlibs) -lm -lpthread
progs-y += tests/drivers/regress-fleet
