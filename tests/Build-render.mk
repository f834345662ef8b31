# SPDX-License-Identifier: MIT
# tests/bench/render-bench.sh's driver (not installed), built by make all-tests (after
# store/Build.mk, whose object lists it links).
render-bench-objs = tests/drivers/render-bench.o $(store-core-y) $(store-render-y) $(pprof-y) \
		    $(port-y)
all-tests: $(O)/tests/drivers/render-bench
$(O)/tests/drivers/render-bench: $(addprefix $(O)/,$(render-bench-objs))
	$(quiet) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(pprof-ldlibs) -lpthread

# Rollups against raw merges (store/ring/rollup.h), rendered as folded stacks to compare.
ifeq ($(CONFIG_COLLECTOR_ROLLUP),y)
unit-tests-y      += rollup
rollup-test-objs   = $(store-core-y) $(store-render-y) $(pprof-y) $(port-y)
rollup-test-ldlibs = $(pprof-ldlibs) -lpthread
endif
