# SPDX-License-Identifier: MIT
# store/ — the collector's network side: server, API handlers, main.
generated-y += $(O)/store/push.pb.h
$(O)/store/push.pb.h $(O)/store/push.pb.c &: store/push.proto
	$(quiet) NANOPB $@
	@mkdir -p $(O)/store
	$(Q)$(NANOPB_GEN) -q -I store -D $(O)/store store/push.proto

store-server-y = store/server.o store/api.o store/api-ingest.o store/api-metrics.o \
		 store/api-render.o store/api-debuginfo.o store/debuginfo.o agent/elf.o \
		 store/push.pb.o

bin-$(CONFIG_COLLECTOR)      += edgeprof-collector
edgeprof-collector-objs      = store/main.o $(store-server-y) $(store-core-y) $(store-ui-y) \
			       $(store-render-y) \
			       $(pprof-y) $(port-net-y) $(port-y)
edgeprof-collector-ldlibs    = $(port-net-ldlibs) $(pprof-ldlibs)

# The load client of the benchmark and the crash test (not installed): built by make all-tests.
collector-tests-y := $(O)/tests/bench/collector-load
all-tests: $(collector-tests-y)
$(O)/tests/bench/collector-load: $(O)/tests/bench/collector-load.o \
		$(addprefix $(O)/,$(port-net-y) $(port-y))
	$(quiet) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(port-net-ldlibs)

