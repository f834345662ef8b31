# SPDX-License-Identifier: MIT
# bpf/ — the eBPF system-wide sampler: profile.bpf.c is built with clang -target bpf into a
# libbpf skeleton ($(O)/bpf/profile.skel.h) that sampler.c embeds: nothing extra to deploy.
#
# The agent links $(bpf-y) with $(bpf-ldlibs) (static order: libbpf needs libelf, which needs
# zlib and zstd).

BPF_CLANG  ?= clang
BPF_STRIP  ?= llvm-strip
BPFTOOL    ?= bpftool
BPF_ARCH-x86_64 := x86
BPF_ARCH-arm64  := arm64
# clang -target bpf knows no multiarch directory: point it at the target's <asm/*.h>.
BPF_ASM_INC-x86_64 := /usr/include/x86_64-linux-gnu
BPF_ASM_INC-arm64  := /usr/aarch64-linux-gnu/include

bpf-y :=
bpf-$(CONFIG_SAMPLER_BPF) += bpf/sampler.o bpf/cpus.o agent/core/ksyms.o
bpf-$(CONFIG_BPF_CFI) += bpf/cfitab.o
# CPython processes' frames (bpf/python.h): their entries, and the splice shared with libedgeprof
bpf-$(CONFIG_BPF_PYTHON) += bpf/python.o bpf/interp.o agent/core/pyname.o agent/core/pysplice.o agent/core/pyline.o \
			    agent/core/framename.o agent/core/pydebug.o
# Lua 5.4 processes' frames (bpf/lua.h): the same splice, luaV_execute and the states found as
# libedgeprof's (agent/core/luaexec.h), names by agent/core/luaname.h
bpf-$(CONFIG_BPF_LUA) += bpf/lua.o bpf/interp.o agent/core/luaexec.o agent/core/luaname.o agent/core/pysplice.o \
			 agent/core/framename.o $(if $(CONFIG_LUA51FRAMES),agent/core/lua51name.o) \
			 $(if $(CONFIG_LJFRAMES),agent/core/ljname.o)
# Node's JavaScript frames (bpf/v8.h) and their names
bpf-$(CONFIG_BPF_V8) += bpf/v8.o bpf/interp.o agent/core/v8name.o agent/core/framename.o
# What cfitab.o reads maps and tables with (the agent links them anyway; the probe and the
# sampler's test name them).
bpf-cfi-deps-$(CONFIG_BPF_CFI) := agent/core/procmaps.o agent/core/ring.o elf/elf.o elf/cfi.o
# (musl boards: libelf built without zstd, tools/musl.sh.)
bpf-ldlibs = $(if $(CONFIG_SAMPLER_BPF),-lbpf -lelf -lz $(if $(MUSL),,-lzstd))

# The sampler and its BPF side must agree on the record layout.
BPF_RECORD_DEFS = -DPROFILE_MAX_DEPTH=$(CONFIG_MAX_STACK_DEPTH) \
		  -DPROFILE_LEAF_WORDS=$(CONFIG_BPF_LEAF_WORDS)
# Programs that compile out with their feature (the skeleton has them or not).
BPF_RECORD_DEFS-$(CONFIG_BPF_OFFCPU) += -DCONFIG_BPF_OFFCPU=1
BPF_RECORD_DEFS-$(CONFIG_BPF_CFI) += -DPROFILE_CFI_CACHE_THREADS=$(CONFIG_BPF_CFI_WALK_CACHE)
BPF_RECORD_DEFS-$(CONFIG_BPF_PYTHON) += -DCONFIG_BPF_PYTHON=1 \
				       -DPROFILE_PY_FRAMES=$(CONFIG_BPF_PYTHON_FRAMES)
BPF_RECORD_DEFS-$(CONFIG_BPF_LUA) += -DCONFIG_BPF_LUA=1 -DPROFILE_LUA_FRAMES=$(CONFIG_BPF_LUA_FRAMES) \
				    -DPROFILE_LUA_STATES=$(CONFIG_BPF_LUA_STATES)
BPF_RECORD_DEFS-$(CONFIG_BPF_V8) += -DCONFIG_BPF_V8=1 -DPROFILE_V8_FRAMES=$(CONFIG_BPF_V8_FRAMES)
BPF_RECORD_DEFS += $(BPF_RECORD_DEFS-y)

ifeq ($(CONFIG_SAMPLER_BPF),y)
generated-y += $(O)/bpf/profile.skel.h

$(O)/bpf/profile.bpf.o: bpf/profile.bpf.c bpf/offcpu.bpf.h bpf/python.bpf.h bpf/pyproc.h bpf/lua.bpf.h bpf/luaproc.h bpf/v8.bpf.h bpf/v8proc.h bpf/profile.h $(O)/include/config/auto.conf
	$(quiet) CLANG-BPF $@
	@mkdir -p $(dir $@)
	$(Q)$(BPF_CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH-$(ARCH)) \
		$(BPF_RECORD_DEFS) -I. -idirafter $(BPF_ASM_INC-$(ARCH)) \
		-Wall -Werror -c -o $@ $<
	$(Q)$(BPF_STRIP) -g -R .BTF.ext -R .rel.BTF.ext $@

$(O)/bpf/profile.skel.h: $(O)/bpf/profile.bpf.o
	$(quiet) GEN-SKEL $@
	$(Q)$(BPFTOOL) gen skeleton $< name profile_bpf > $@.tmp && mv $@.tmp $@

CFLAGS_sampler = $(BPF_RECORD_DEFS)
CFLAGS_bpf-probe = $(BPF_RECORD_DEFS)
CFLAGS_python = $(BPF_RECORD_DEFS)
CFLAGS_lua = $(BPF_RECORD_DEFS)
CFLAGS_v8 = $(BPF_RECORD_DEFS)

# Test driver (not installed): samples the system for N seconds and prints folded stacks.
# (--python: the process table the agent finds CPython processes in)
bpf-probe-objs    = bpf/bpf-probe.o $(bpf-y) $(bpf-cfi-deps-y) agent/core/procmaps.o \
		    agent/core/ring.o elf/elf.o $(port-y)
bpf-probe-ldflags = $(LDFLAGS-static-y)
bpf-probe-ldlibs  = $(bpf-ldlibs)
progs-y += tests/bpf-probe

# Workloads for the BPF tests: frame pointers on, not PIE, so nm(1) names their addresses.
$(O)/tests/workloads/bpf-work: tests/workloads/bpf-work.c
	$(quiet) CC $@
	@mkdir -p $(dir $@)
	$(Q)$(GLIBC_CC) -O1 -g -fno-omit-frame-pointer -fno-inline -no-pie -pthread -o $@ $<

# The same, linked static: gcc gives it no .eh_frame_hdr (the agent indexes .eh_frame itself).
$(O)/tests/workloads/bpf-work-static: tests/workloads/bpf-work.c
	$(quiet) CC $@
	@mkdir -p $(dir $@)
	$(Q)$(GLIBC_CC) -O1 -g -fno-omit-frame-pointer -fno-inline -static -pthread -o $@ $<

# The same without frame pointers, as distributions build (-O2 -fomit-frame-pointer): whole
# stacks only by unwind tables (bpf/cfitab.h). Not inlined, so every function is a frame.
$(O)/tests/workloads/bpf-work-nofp: tests/workloads/bpf-work.c
	$(quiet) CC $@
	@mkdir -p $(dir $@)
	$(Q)$(GLIBC_CC) -O2 -g -fomit-frame-pointer -fno-inline -fno-optimize-sibling-calls -no-pie \
		-pthread -o $@ $<

all-tests: $(O)/tests/workloads/bpf-work $(O)/tests/workloads/bpf-work-static \
	   $(O)/tests/workloads/bpf-work-nofp
unit-tests-$(CONFIG_BPF_MMAP_EVENTS) += mmapev
mmapev-test-objs = bpf/mmapev.o bpf/cpus.o agent/core/procmaps.o elf/elf.o agent/core/ring.o port/file.o
# cfitab's bookkeeping (who gets the room) against real processes, its maps stubbed
unit-tests-$(CONFIG_BPF_CFI) += cfitab
cfitab-test-objs = bpf/cfitab.o $(bpf-cfi-deps-y) $(port-y)
# V8's postmortem symbols read from the real node files there are
unit-tests-$(CONFIG_BPF_V8) += v8
v8-test-objs = bpf/v8.o bpf/interp.o agent/core/v8name.o agent/core/framename.o
v8-test-ldlibs = -Wl,-Bstatic $(bpf-ldlibs) -Wl,-Bdynamic
CFLAGS_v8-test = $(BPF_RECORD_DEFS)
unit-tests-y += bpf-sampler
bpf-sampler-test-objs = bpf/sampler.o bpf/cpus.o agent/core/ksyms.o \
			$(filter bpf/cfitab.o bpf/python.o bpf/lua.o bpf/v8.o bpf/interp.o agent/core/py%.o agent/core/lua%.o agent/core/lj%.o agent/core/v8name.o agent/core/framename.o,$(bpf-y)) \
			$(bpf-cfi-deps-y) $(port-y)
# Static: the cross sysroot keeps libz.so.1 where neither the linker nor qemu looks.
bpf-sampler-test-ldlibs = -Wl,-Bstatic $(bpf-ldlibs) -Wl,-Bdynamic
CFLAGS_bpf-sampler-test = $(BPF_RECORD_DEFS)
endif # CONFIG_SAMPLER_BPF

unit-tests-y += ksyms
ksyms-test-objs = agent/core/ksyms.o $(port-y)
