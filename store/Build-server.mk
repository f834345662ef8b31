# SPDX-License-Identifier: MIT
# store/ — the collector's network side: server, API handlers, main.
generated-y += $(O)/store/api/push.pb.h
$(O)/store/api/push.pb.h $(O)/store/api/push.pb.c &: store/api/push.proto
	$(quiet) NANOPB $@
	@mkdir -p $(O)/store/api
	$(Q)$(NANOPB_GEN) -q -I store/api -D $(O)/store/api store/api/push.proto

store-server-y = store/server/server.o store/server/answer.o store/api/api.o \
		 store/api/api-handler.o store/api/api-ingest.o store/api/api-metrics.o \
		 store/api/api-render.o store/api/api-debuginfo.o store/server/mem-budget.o store/symbols/debuginfo.o store/symbols/snapunwind.o elf/dwcfi.o elf/elf.o \
		 store/api/push.pb.o $(store-dwarf-y) $(store-duty-y)
store-duty-$(CONFIG_COLLECTOR_DUTY) := store/api/duty.o

# Fleet-wide duty cycling: a simulated fleet of 10,000 devices under a 5 % budget.
unit-tests-$(CONFIG_COLLECTOR_DUTY) += duty
duty-test-objs   = store/api/duty.o
duty-test-ldlibs = -lm -lpthread
store-dwarf-$(CONFIG_COLLECTOR_DWARF) := store/symbols/dwarf-line.o store/symbols/dwarf-elf.o
# The collector's own scrapes (store/scrape/scrape.h): file_sd targets, the GET client, the deltas.
store-scrape-objs = $(if $(CONFIG_COLLECTOR_SCRAPE),store/scrape/scrape.o store/scrape/scrape-sd.o \
		    $(pprof-scrape-y))
unit-tests-$(CONFIG_COLLECTOR_SCRAPE) += scrape-sd
scrape-sd-test-objs = store/scrape/scrape-sd.o

# The line-table reader on gcc-built objects (DWARF 5 and 4), and on any bytes (make fuzz).
unit-tests-$(CONFIG_COLLECTOR_DWARF) += dwarf-line
dwarf-line-test-objs   = $(store-dwarf-y) port/file.o
dwarf-line-test-ldlibs = -lz
dwarf-fixtures := $(addprefix $(O)/tests/unit/dwarf-line-fixture-,5 4 stripped)
$(O)/tests/unit/dwarf-line-test: | $(dwarf-fixtures)
$(O)/tests/unit/dwarf-line-fixture-%: tests/unit/store/symbols/dwarf-line-fixture.c
	$(quiet) CC $@
	@mkdir -p $(dir $@)
	$(Q)$(CC) -O0 $(if $(filter stripped,$*),-g0,-gdwarf-$*) -no-pie -o $@ $<
fuzz-$(CONFIG_COLLECTOR_DWARF) += dwarf-line
dwarf-line-fuzz-objs = store/symbols/dwarf-line.o

bin-$(CONFIG_COLLECTOR)      += edgeprof-collector
edgeprof-collector-objs      = store/main.o $(store-server-y) $(store-core-y) $(store-ui-y) \
			       $(store-render-y) $(store-scrape-objs) \
			       $(pprof-y) $(pprof-folded-y) $(port-net-y) $(port-y)
edgeprof-collector-ldlibs    = $(port-net-ldlibs) $(pprof-ldlibs)

# The load client of the benchmark and the crash test (not installed): built by make all-tests.
collector-load-objs   = tests/drivers/collector-load.o $(port-tls-y) $(port-y)
collector-load-ldlibs = $(port-net-ldlibs)
progs-y += tests/drivers/collector-load


# Stack snapshots unwound at ingest, against hostile but well-formed snapshots and a budget.
unit-tests-$(CONFIG_COLLECTOR) += snapunwind
snapunwind-test-objs   = store/symbols/snapunwind.o store/symbols/debuginfo.o elf/dwcfi.o elf/elf.o \
			 pprof/snapshot.o $(store-dwarf-y) $(pprof-y) $(port-y)
snapunwind-test-ldlibs = $(pprof-ldlibs)
