# SPDX-License-Identifier: MIT
# store/ — the collector's storage engine: ring file, index, selectors, times, queries.
# The backends behind store/store.h: the ring file, and ClickHouse (its HTTP client on port/http
# and port/net, which the collector links anyway: $^ lists an object once).
store-ch-$(CONFIG_COLLECTOR_CLICKHOUSE) := store/ch/store-ch.o store/ch/ch-query.o store/ch/ch-list.o store/ch/ch-client.o \
					   store/ch/ch-spool.o store/ch/ch-retain.o store/ch/ch-rollup.o \
					   store/ch/ch-daily.o store/ch/ch-backfill.o \
					   store/ch/ch-schema.o store/ch/ch-rows.o store/ch/ch-native.o \
					   store/ch/ch-ingest.o store/ch/ch-writer.o port/net.o port/http.o
store-core-y = $(port-ring-y) $(store-ch-y) store/ring/index.o store/query/selector.o store/query/timeparse.o \
	       store/store.o store/ring/store-ring.o \
	       store/ring/rollup-plan.o $(store-rollup-y) $(store-mrules-y)
store-mrules-$(CONFIG_COLLECTOR_METRICS_RULES) := store/rules/metrics-rules.o
store-rollup-$(CONFIG_COLLECTOR_ROLLUP) := store/ring/rollup.o

unit-tests-y        += timeparse selector
timeparse-test-objs  = store/query/timeparse.o
selector-test-objs   = store/query/selector.o port/clock.o
# Selectors run in the collector, a glibc program (no LIBC_MUSL with COLLECTOR): its regex
# engine's CPU bounds are tested with glibc's regexec, as it runs (musl's is slower per call).
unit-tests-glibc    += selector

# The metrics rules on profiles made by the builder (runs on every board's qemu too).
unit-tests-$(CONFIG_COLLECTOR_METRICS_RULES) += metrics-rules
metrics-rules-test-objs   = store/rules/metrics-rules.o store/query/selector.o $(pprof-y) $(port-y)
metrics-rules-test-ldlibs = $(pprof-ldlibs) -lpthread

unit-tests-y    += index
index-test-objs  = store/ring/index.o

# The collector's hourly rollup rows (ClickHouse) against what the view made of the same rows.
unit-tests-$(CONFIG_COLLECTOR_CLICKHOUSE) += ch-rollup
ch-rollup-test-objs = store/ch/ch-rollup.o store/ch/ch-client.o port/net.o port/http.o $(port-y)

# Its rows of a profile decoded with merged samples against those of the plain decode.
unit-tests-$(CONFIG_COLLECTOR_CLICKHOUSE) += ch-rows
ch-rows-test-objs   = $(store-core-y) $(pprof-y) $(port-y)
ch-rows-test-ldlibs = $(pprof-ldlibs) -lpthread

unit-tests-y     += query
query-test-objs   = $(store-core-y) $(pprof-y) $(port-y)
query-test-ldlibs = $(pprof-ldlibs) -lpthread

# Test drivers (not installed), built by `make all-tests`: the crash/corruption/wraparound
# integration tests and the benchmark run them.
store-append-objs = tests/drivers/store-append.o $(port-ring-y) $(port-y)
store-bench-objs  = tests/drivers/store-bench.o $(store-core-y) $(pprof-y) $(port-y)
store-append-ldlibs = -lpthread
store-bench-ldlibs  = $(pprof-ldlibs) -lpthread
progs-y += tests/drivers/store-append tests/drivers/store-bench

# The decode and rows of the ClickHouse store per profile, in-process (tests/drivers/ch-rows.c).
ch-rows-objs = tests/drivers/ch-rows.o $(store-core-y) $(pprof-y) $(port-y)
ch-rows-ldlibs = $(pprof-ldlibs) -lpthread
progs-$(CONFIG_COLLECTOR_CLICKHOUSE) += tests/drivers/ch-rows

# The metrics rules' cost per profile, in-process (tests/bench/metrics-bench.sh).
metrics-eval-objs = tests/drivers/metrics-eval.o $(store-core-y) $(pprof-y) $(port-y)
metrics-eval-ldlibs = $(pprof-ldlibs) -lpthread
progs-$(CONFIG_COLLECTOR_METRICS_RULES) += tests/drivers/metrics-eval

# Fuzz targets (make fuzz): any text as a selector or a time.
fuzz-y += store-selector
store-selector-fuzz-objs = store/query/selector.o store/query/timeparse.o port/clock.o
