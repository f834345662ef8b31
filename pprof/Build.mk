# SPDX-License-Identifier: MIT
# pprof/ — the profile format: proto, nanopb-generated definitions, builder, reader, merge.
# The nanopb code is generated at build time into $(O)/pprof/ (never committed) by Debian's
# generator; the runtime comes from libnanopb-dev (-lprotobuf-nanopb, also in the sysroots).
pprof-y      = pprof/profile.pb.o pprof/util.o pprof/builder.o pprof/writer.o pprof/reader.o \
	       pprof/merge.o pprof/merge-parallel.o pprof/write-parallel.o pprof/symbolize.o \
	       pprof/read-scratch.o pprof/budget.o pprof/snapshot.o port/clock.o
pprof-ldlibs = -lprotobuf-nanopb -lz -lpthread
# Folded text read as a profile: the CLI and the collector link it, the agent does not.
pprof-folded-y = pprof/folded.o

# gzip input: libdeflate's whole-buffer inflate where the board has it, zlib's path always.
pprof-inflate-y := pprof/inflate-zlib.o
ifeq ($(CONFIG_PPROF_LIBDEFLATE),y)
pprof-inflate-y := pprof/inflate-libdeflate.o
pprof-ldlibs    += -ldeflate
endif
pprof-y += $(pprof-inflate-y)

NANOPB_GEN := $(PYTHON) /usr/bin/nanopb_generator.py

generated-y += $(O)/pprof/profile.pb.h
$(O)/pprof/profile.pb.h $(O)/pprof/profile.pb.c &: pprof/profile.proto pprof/profile.options
	$(quiet) NANOPB $@
	@mkdir -p $(O)/pprof
	$(Q)$(NANOPB_GEN) -q -I pprof -D $(O)/pprof -f pprof/profile.options pprof/profile.proto

unit-tests-y              += pprof-builder pprof-reader pprof-merge pprof-symbolize \
			     pprof-merge-parallel pprof-snapshot
pprof-snapshot-test-objs   = pprof/snapshot.o
pprof-merge-parallel-test-objs   = $(pprof-y)
pprof-merge-parallel-test-ldlibs = $(pprof-ldlibs)
pprof-symbolize-test-objs   = $(pprof-y)
pprof-symbolize-test-ldlibs = $(pprof-ldlibs)
pprof-builder-test-objs   = $(pprof-y)
pprof-builder-test-ldlibs = $(pprof-ldlibs)
pprof-reader-test-objs    = $(pprof-y)
pprof-reader-test-ldlibs  = $(pprof-ldlibs)
pprof-merge-test-objs     = $(pprof-y)
pprof-merge-test-ldlibs   = $(pprof-ldlibs)

# Helpers for the oracle test and the benchmark (not installed): built by `make all-tests`.
pprof-tool-objs   = tests/pprof-tool.o $(pprof-y) port/file.o
pprof-tool-ldlibs = $(pprof-ldlibs)
progs-y += tests/pprof-tool

# Fuzz targets: tools/run-fuzz.sh NAME... builds tests/fuzz/NAME.c with clang's libFuzzer
# against the sources listed in tests/fuzz/NAME.srcs and runs it for a bounded time.
fuzz-y += pprof-reader pprof-folded
pprof-reader-fuzz-objs   = $(pprof-y)
pprof-reader-fuzz-ldlibs = $(pprof-ldlibs)
pprof-folded-fuzz-objs   = $(pprof-folded-y) $(pprof-y)
pprof-folded-fuzz-ldlibs = $(pprof-ldlibs)

# tools/run-fuzz.sh builds fuzz targets with clang outside this Makefile; it only needs the
# generated headers. The recipe expands at run time, after every Build.mk has added its own.
fuzz-generated: $(O)/include/config/auto.conf
	$(Q)$(MAKE) --no-print-directory $(generated-y)
.PHONY: fuzz-generated

# Cumulative profiles into deltas between rounds (pprof/delta.h): linked by the scrapers.
pprof-delta-y := pprof/delta.o
# One scrape of a /debug/pprof endpoint (fetch, state, delta): the agent's and the collector's.
pprof-scrape-y = pprof/scrape.o $(pprof-delta-y) $(port-fetch-y)
unit-tests-y += pprof-delta
pprof-delta-test-objs   = $(pprof-y) $(pprof-delta-y)
pprof-delta-test-ldlibs = $(pprof-ldlibs)
