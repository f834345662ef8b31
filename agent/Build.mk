# SPDX-License-Identifier: MIT
# agent/ — the device daemon (edgeprof-agent) and the in-process sampler (libedgeprof.so).
# Other areas' lists (pprof-y, port-y, bpf-y, agent-transport-y) are set in files included
# after this one: everything naming them uses deferred '='.

agent-core-y := agent/core/ring.o agent/core/aggregate.o agent/core/rounds.o agent/core/procmaps.o elf/elf.o \
		agent/core/output.o
agent-core-$(CONFIG_SYMBOLIZE) += agent/core/symbolize.o
agent-core-$(CONFIG_PERFMAP) += agent/core/perfmap.o
agent-core-$(CONFIG_PYFRAMES) += agent/core/pyname.o agent/core/pysplice.o agent/core/pyline.o \
				 agent/core/pydebug.o
agent-core-$(CONFIG_LUAFRAMES) += agent/core/luaname.o agent/core/luaexec.o
agent-core-$(CONFIG_LUA51FRAMES) += agent/core/lua51name.o
agent-core-$(CONFIG_LJFRAMES) += agent/core/ljname.o
# The interpreters' frame-name cache (agent/core/framename.h): once for either or both.
agent-framename-$(CONFIG_PYFRAMES) := agent/core/framename.o
agent-framename-$(CONFIG_LUAFRAMES) := agent/core/framename.o
agent-core-y += $(agent-framename-y)

# The daemon: main.c and, per feature, its glue (agent/daemon/<feature>.h: stubs when off).
agent-y := agent/daemon/main.o agent/daemon/features.o agent/daemon/stats.o \
	   agent/daemon/round.o agent/daemon/services.o agent/daemon/duty.o \
	   agent/daemon/sigprof-rings.o $(agent-core-y)
agent-y-$(CONFIG_UPLOAD_MTLS) += agent/daemon/upload.o
# The BPF sampler's leaf frames: .eh_frame rules of the sampled processes' files.
agent-y-$(CONFIG_SAMPLER_BPF) += agent/daemon/bpf.o bpf/leaf.o elf/cfi.o
# New programs' mappings from the kernel's mmap records (the process table's loader).
agent-y-$(CONFIG_BPF_MMAP_EVENTS) += bpf/mmapev.o
# Heap profiles of the sigprof producers (<pid>.heap beside their rings).
agent-y-$(CONFIG_PROFILE_HEAP) += agent/daemon/heap.o agent/core/heapfile.o
# Pull mode: /debug/pprof/ served over mutual TLS (agent/daemon/pull.h).
agent-y-$(CONFIG_PULL_SERVER) += agent/daemon/pull-loop.o agent/daemon/pull.o port/tls-server.o
# Scraping local pprof endpoints: the main loop's side (the scraper: agent-scrape-objs below).
agent-y-$(CONFIG_AGENT_SCRAPE) += agent/daemon/scrape-loop.o
agent-y += $(agent-y-y)

bin-y                  += edgeprof-agent
# Scraping local pprof endpoints (agent/daemon/scrape.h): its thread, the GET client, the deltas.
agent-scrape-objs       = $(if $(CONFIG_AGENT_SCRAPE),agent/daemon/scrape.o $(pprof-scrape-y))
edgeprof-agent-objs    = $(agent-y) $(agent-scrape-objs) $(pprof-y) $(bpf-y) \
			 $(agent-transport-objs) $(port-y)
edgeprof-agent-ldlibs  = $(pprof-ldlibs) $(bpf-ldlibs) $(agent-transport-ldlibs)

# libedgeprof.so: the SIGPROF sampler, with the pprof writer for standalone mode. Only its
# public API is exported (objects are built -fvisibility=hidden; static archives excluded).
lib-$(CONFIG_SAMPLER_SIGPROF) += libedgeprof.so
# The heap profiler interposes the allocator (agent/lib/heap.h): a feature by file.
libedgeprof-heap-$(CONFIG_PROFILE_HEAP) := agent/lib/heap.o agent/core/heapfile.o
# Wall-clock profiles: the blocking calls' entry points and the ticker (agent/lib/wall.h).
libedgeprof-wall-$(CONFIG_PROFILE_WALL) := agent/lib/wall.o
# armv7 frames without unwind tables, by reading the code (elf/armframe.h).
libedgeprof-arm-$(CONFIG_ARCH_ARM) := elf/armframe.o
# armv7 stack snapshots for the collector to unwind (agent/lib/snapshot.h).
libedgeprof-snap-$(CONFIG_ARCH_ARM) := agent/lib/snapshot.o
# arm64 frames without unwind tables, by reading the code (elf/a64frame.h).
libedgeprof-arm-$(CONFIG_ARCH_ARM64) := elf/a64frame.o
# CPython's frames spliced into the samples (agent/lib/pyframes.h).
libedgeprof-py-$(CONFIG_PYFRAMES) := agent/lib/pyframes.o
# Lua 5.4's frames spliced into the samples (agent/lib/luaframes.h).
libedgeprof-lua-$(CONFIG_LUAFRAMES) := agent/lib/luaframes.o
# Lua 5.1's (agent/lib/lua51frames.c).
libedgeprof-lua-$(CONFIG_LUA51FRAMES) += agent/lib/lua51frames.o
# LuaJIT 2.1's (agent/lib/ljframes.c).
libedgeprof-lua-$(CONFIG_LJFRAMES) += agent/lib/ljframes.o
# armv7: luaV_execute's bounds read from the code (no unwind tables in Debian's armhf lua5.4).
libedgeprof-luaarm-$(CONFIG_ARCH_ARM) := agent/lib/luaarm.o
libedgeprof-lua-$(CONFIG_LUAFRAMES) += $(libedgeprof-luaarm-y)
# Fault-free reads of the process's own memory, for both interpreters' walkers.
libedgeprof-selfread-$(CONFIG_PYFRAMES) := agent/lib/selfread.o
libedgeprof-selfread-$(CONFIG_LUAFRAMES) := agent/lib/selfread.o
libedgeprof.so-objs   = agent/lib/sigprof.o agent/lib/sigctl.o agent/lib/unwind.o \
			agent/lib/modules.o elf/cfi.o elf/ehabi.o $(agent-core-y) $(pprof-y) \
			port/file.o port/clock.o $(libedgeprof-heap-y) $(libedgeprof-wall-y) \
			$(libedgeprof-arm-y) $(libedgeprof-snap-y) $(libedgeprof-py-y) \
			$(libedgeprof-lua-y) $(libedgeprof-selfread-y)
libedgeprof.so-ldlibs = -Wl,--exclude-libs,ALL -Wl,-z,now $(pprof-ldlibs) -ldl -lpthread -lrt -lm
install-y += agent-install-header
agent-install-header = install -m 0644 agent/edgeprof.h $(1)$(2)/include/

unit-tests-y      += ring aggregate rounds elf unwind
# The unwinder runs only in libedgeprof.so: tested as it is built (glibc, -fPIC; Makefile).
unit-tests-glibc  += unwind
unwind-test-objs   = agent/lib/unwind.o agent/lib/modules.o elf/cfi.o elf/ehabi.o $(libedgeprof-arm-y)
unwind-test-ldlibs = -ldl -lpthread
CFLAGS_unwind-test = -funwind-tables # its armv7 walk needs .ARM.exidx entries
# Bad pointers fed to the interpreter walkers' reader (built as libedgeprof.so is).
unit-tests-$(if $(libedgeprof-selfread-y),y) += selfread
unit-tests-glibc  += selfread
selfread-test-objs = agent/lib/selfread.o
selfread-test-ldlibs = -ldl
ring-test-objs     = agent/core/ring.o
ring-test-ldlibs   = -lpthread
aggregate-test-objs = agent/core/aggregate.o
rounds-test-objs   = agent/core/rounds.o
# It reads its own process as the sample of a device's program: a dynamic glibc one (libc
# mapped, a build-id note), so it is built as libedgeprof.so is.
unit-tests-glibc  += elf
elf-test-objs      = elf/elf.o agent/core/procmaps.o agent/core/ring.o port/file.o
unit-tests-$(CONFIG_PERFMAP) += perfmap
perfmap-test-objs  = agent/core/perfmap.o port/clock.o
unit-tests-$(if $(agent-framename-y),y) += framename
framename-test-objs = agent/core/framename.o
framename-test-ldlibs = -lpthread
unit-tests-$(CONFIG_LUAFRAMES) += luaname
luaname-test-objs  = agent/core/luaname.o agent/core/framename.o \
		     $(if $(CONFIG_LUA51FRAMES),agent/core/lua51name.o) \
		     $(if $(CONFIG_LJFRAMES),agent/core/ljname.o)
luaname-test-ldlibs = -lpthread
unit-tests-$(CONFIG_LUAFRAMES) += luaexec
luaexec-test-objs = agent/core/luaexec.o
unit-tests-$(CONFIG_LUA51FRAMES) += lua51name
lua51name-test-objs = agent/core/luaname.o agent/core/framename.o agent/core/lua51name.o \
		      $(if $(CONFIG_LJFRAMES),agent/core/ljname.o)
lua51name-test-ldlibs = -lpthread
unit-tests-$(CONFIG_LJFRAMES) += ljname
ljname-test-objs   = agent/core/luaname.o agent/core/framename.o agent/core/ljname.o \
		     $(if $(CONFIG_LUA51FRAMES),agent/core/lua51name.o)
ljname-test-ldlibs = -lpthread
perfmap-test-ldlibs = -lpthread
unit-tests-$(CONFIG_PYFRAMES) += pysplice
pysplice-test-objs = agent/core/pysplice.o
unit-tests-$(CONFIG_PYFRAMES) += pyline
pyline-test-objs = agent/core/pyline.o
unit-tests-$(CONFIG_PYFRAMES) += pydebug
pydebug-test-objs = agent/core/pydebug.o agent/core/pyname.o agent/core/pyline.o agent/core/framename.o
pydebug-test-ldlibs = -lpthread
unit-tests-$(CONFIG_PROFILE_HEAP) += heapfile
heapfile-test-objs = agent/core/heapfile.o
unit-tests-$(CONFIG_SAMPLER_BPF) += leaf
leaf-test-objs     = bpf/leaf.o elf/cfi.o $(elf-test-objs)

# Workloads (test helpers, not installed): frame pointers on, -O2 so leaves have no frame.
agent-workloads := split torture harm heapsplit wallsplit
agent-workload-bins := $(addprefix $(O)/tests/workloads/,$(agent-workloads))
$(O)/tests/workloads/%: tests/workloads/%.c
	$(quiet) CC $@
	@mkdir -p $(dir $@)
	$(Q)$(GLIBC_CC) -O2 -g -fno-omit-frame-pointer -pthread -o $@ $< -ldl
# The same split, stripped: its profile must carry the build-id for desktop symbolization.
$(O)/tests/workloads/split-stripped: $(O)/tests/workloads/split
	$(quiet) STRIP $@
	$(Q)$(STRIP) -o $@ $<
# harm as firmware is built without tables (arm64): its stackuse is the handler's while it
# reads frames from the code (sigprof-harm checks it as the board's harm).
$(O)/tests/workloads/harm-notables: tests/workloads/harm.c
	$(quiet) CC $@
	@mkdir -p $(dir $@)
	$(Q)$(GLIBC_CC) -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables \
		-pthread -o $@ $< -ldl
all-tests: $(agent-workload-bins) $(O)/tests/workloads/split-stripped
all-tests: $(if $(CONFIG_ARCH_ARM64),$(O)/tests/workloads/harm-notables)
