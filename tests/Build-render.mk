# SPDX-License-Identifier: MIT
# tests/bench/render-bench.sh's driver (not installed), built by make all-tests (after
# store/Build.mk, whose object lists it links).
render-bench-objs = tests/drivers/render-bench.o $(store-core-y) $(store-render-y) $(pprof-y) \
		    $(port-y)
render-bench-ldlibs = $(pprof-ldlibs) -lpthread
progs-y += tests/drivers/render-bench

# Rollups against raw merges (store/ring/rollup.h), rendered as folded stacks to compare.
ifeq ($(CONFIG_COLLECTOR_ROLLUP),y)
unit-tests-y      += rollup
rollup-test-objs   = $(store-core-y) $(store-render-y) $(pprof-y) $(port-y)
rollup-test-ldlibs = $(pprof-ldlibs) -lpthread
endif
