# SPDX-License-Identifier: MIT
#
# edgeprof — a kbuild-style, non-recursive Makefile.
#
#   make <board>_defconfig     configure for boards/<board> (remembered in build/.board)
#   make menuconfig            change the configuration of the current board
#   make olddefconfig | savedefconfig | allnoconfig | allyesconfig
#   make [V=1]                 build into build/<board>/
#   make test [BOARD=b] [SAN=1]  unit tests (under qemu-user for ARM boards) + integration tests
#   make test-arm              the ARM boards' unit tests (qemu-user) and the host tests that
#                              need their builds (an arm64 VM, qemu-user): what make test skips
#   make testconfigs           build every board, allno/allyes and each feature alone
#   make size [BOARDS="b ..."]   per board: stripped bytes per binary and per feature
#   make size-check            every board within boards/<board>/size-budget
#   make demo-fleet            ClickHouse on loopback, two collectors, 1,000 simulated devices
#   make install DESTDIR=d     lay out binaries, config and init files
#   make clean | distclean
#
# Each area (port/, pprof/, agent/, bpf/, store/, tools/) lists its objects, binaries and unit
# tests in its own Build.mk; features compile in by whole files: obj-$(CONFIG_X) += x.o.

VERSION    := 0.1.0
PYTHON     := /usr/bin/python3
KCONFIG    := $(PYTHON) kconfig/kconfig.py
BOARD_FILE := build/.board
BOARD      ?= $(or $(shell cat $(BOARD_FILE) 2>/dev/null),host-x86_64)
ifneq ($(SAN),)
O          ?= build/$(BOARD)-san
else
O          ?= build/$(BOARD)
endif
PREFIX     ?= /usr
DESTDIR    ?=

ifeq ($(V),1)
Q :=
quiet = @true
else
Q := @
quiet = @printf '  %-8s %s\n'
endif

.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SUFFIXES:

unquote = $(patsubst "%",%,$(1))

# ---------------------------------------------------------------------------------------------
# Set-up comes first: on a bare machine even the configuration step needs a package
# (python3-kconfiglib), so every rule that runs kconfig waits for the setup stamp of the board's
# architecture. That architecture is read without kconfiglib: from the board's .config once it
# exists (menuconfig may have changed it), else from boards/<board>/defconfig.

#
# The set-up comes in tiers (tools/setup.sh): what a build needs, what the demo adds, what the
# test suite adds. Each goal waits for its tier's stamp; a higher tier's stamp does for a lower
# one. build/.setup-<arch>.stamp is the test tier (everything), -demo the demo's, -build a
# build's (-build-static: a static board's, with its musl toolchain's needs).

arch-of = $(or $(if $(shell grep -sx 'CONFIG_ARCH_ARM64=y' $(1)),arm64),$(if $(shell grep -sx \
	'CONFIG_ARCH_ARM=y' $(1)),armhf))
board-conf  := $(or $(wildcard $(O)/.config),boards/$(BOARD)/defconfig)
SETUP_ARCH  := $(or $(call arch-of,$(board-conf)),x86_64)
SETUP_STATIC := $(if $(shell grep -sx 'CONFIG_STATIC=y' $(board-conf)),-static)
SETUP_TIER  := $(if $(filter test all-tests testconfigs fuzz demo-fleet setup,$(MAKECMDGOALS)),test,$(if \
	$(filter demo,$(MAKECMDGOALS)),demo,build))
ifeq ($(SETUP_TIER),demo)
SETUP_ARCH  := x86_64
SETUP_STATIC :=
endif
setup-stamp = build/.setup-$(SETUP_ARCH)$(if $(filter-out test,$(1)),-$(1)).stamp
setup-enough-build := test $(if $(SETUP_STATIC),build-static,demo build)
setup-enough-demo  := test demo
setup-enough-test  := test
SETUP_STAMP := $(or $(firstword $(wildcard $(foreach t,$(setup-enough-$(SETUP_TIER)),$(call \
	setup-stamp,$(t))))),$(call setup-stamp,$(SETUP_TIER)$(if $(filter build,$(SETUP_TIER)),$(SETUP_STATIC))))
# The tier and static-ness of a stamp (a higher tier's stamp is renewed as that tier).
stamp-tier = $(or $(if $(findstring -build,$(1)),build),$(if $(findstring -demo,$(1)),demo),test)
setup-args = --arch $(SETUP_ARCH) --tier $(call stamp-tier,$(1))$(if $(findstring -static,$(1)), --static)

# Not set up and not root: say what to run before anything else (GNU make would first complain
# that the configuration it cannot make yet is missing).
setup-free-goals := help clean distclean size size-check fuzz-srcs test-arm
ifeq ($(wildcard $(SETUP_STAMP))$(SETUP_SKIP),)
ifneq ($(filter-out $(setup-free-goals),$(or $(MAKECMDGOALS),all)),)
ifneq ($(shell id -u),0)
$(info edgeprof: the Debian packages this needs ($(call stamp-tier,$(SETUP_STAMP)) tier) are not \
installed yet, and installing them needs root. Run:)
$(info $(empty)    sudo tools/setup.sh $(call setup-args,$(SETUP_STAMP)))
$(info then run make again (or SETUP_SKIP=1 if you installed them yourself).)
$(error not set up)
endif
endif
endif

# ---------------------------------------------------------------------------------------------
# Configuration verbs: they need no .config to exist.

no-config-goals := %config menuconfig help clean distclean setup size size-check test-arm
config-only := $(if $(MAKECMDGOALS),$(if $(filter-out $(no-config-goals),$(MAKECMDGOALS)),,1),)

%_defconfig:
	@test -f boards/$*/defconfig || { echo "No board '$*'. Boards: $$(ls boards)"; exit 2; }
	$(Q)$(MAKE) --no-print-directory BOARD=$* defconfig

defconfig: | $(SETUP_STAMP)
	@test -f boards/$(BOARD)/defconfig || { echo "No board '$(BOARD)'. Boards: $$(ls boards)"; exit 2; }
	@mkdir -p $(O)
	$(Q)$(KCONFIG) defconfig $(O)/.config boards/$(BOARD)/defconfig $(SET)
	@# Only the board's own build directory becomes the default (not O= builds elsewhere).
	@if [ "$(O)" = "build/$(BOARD)" ]; then echo $(BOARD) > $(BOARD_FILE); fi
	@echo "  CONFIG   $(O)/.config (board $(BOARD))"

olddefconfig menuconfig: | $(SETUP_STAMP) $(O)/.config
	$(Q)$(KCONFIG) $@ $(O)/.config

savedefconfig: | $(SETUP_STAMP) $(O)/.config
	$(Q)$(KCONFIG) savedefconfig $(O)/.config $(O)/defconfig
	@echo "  SAVED    $(O)/defconfig (copy it to boards/$(BOARD)/defconfig to keep it)"

# allnoconfig/allyesconfig keep the board's toolchain; SET="SYM=y ..." turns single features on.
allnoconfig allyesconfig: | $(SETUP_STAMP) $(O)/.config
	$(Q)$(KCONFIG) $@ $(O)/.config $(SET)

# A board used for the first time gets its defconfig.
$(O)/.config: | $(SETUP_STAMP)
	@test -f boards/$(BOARD)/defconfig || { echo "No board '$(BOARD)'. Boards: $$(ls boards)"; exit 2; }
	@mkdir -p $(O)
	$(Q)$(KCONFIG) defconfig $@ boards/$(BOARD)/defconfig

$(O)/include/config/auto.conf: $(O)/.config kconfig/Kconfig $(wildcard */Kconfig) | $(SETUP_STAMP)
	$(quiet) GEN $(O)/include/generated/autoconf.h
	$(Q)$(KCONFIG) genconfig $(O)/.config $(O)/include/generated/autoconf.h $@
	$(Q)touch $@

ifeq ($(config-only),)
include $(O)/include/config/auto.conf
endif

# ---------------------------------------------------------------------------------------------
# Toolchain.

ARCH          := $(call unquote,$(CONFIG_ARCH))
CROSS_COMPILE ?= $(call unquote,$(CONFIG_CROSS_COMPILE))
CC            := $(CROSS_COMPILE)gcc
STRIP         := $(CROSS_COMPILE)strip
HOSTCC        := gcc
TRIPLE        := $(patsubst %-,%,$(CROSS_COMPILE))
QEMU-arm64    := qemu-aarch64
QEMU-armhf    := qemu-arm
HOST_ARCH     := x86_64

ifneq ($(CROSS_COMPILE),)
SYSROOT       := build/sysroot-$(ARCH)
SYSROOT_LIB   := $(SYSROOT)/usr/lib/$(TRIPLE)
TARGET_CPPFLAGS := -isystem $(SYSROOT)/usr/include
TARGET_LDFLAGS  := -L$(SYSROOT_LIB) -Wl,-rpath-link,$(SYSROOT_LIB)
# Tests run under qemu-user with the target's loader and the sysroot's shared libraries.
RUN_TARGET    := $(QEMU-$(ARCH)) -L /usr/$(TRIPLE) -E LD_LIBRARY_PATH=$(abspath $(SYSROOT_LIB))
endif

# Static boards link against musl (CONFIG_LIBC_MUSL): gcc with a specs file for build/musl-<arch>
# (tools/musl.sh: Debian's musl-dev and the libraries from Debian's sources). libedgeprof.so is
# preloaded into the device's glibc programs and stays a glibc library: it, its objects and the
# test workloads it is preloaded into are built by GLIBC_CC against the glibc sysroot.
GLIBC_CC       := $(CC)
GLIBC_CPPFLAGS := $(TARGET_CPPFLAGS)
GLIBC_LDFLAGS  := $(TARGET_LDFLAGS)
ifeq ($(CONFIG_LIBC_MUSL),y)
MUSL          := build/musl-$(ARCH)
MUSL_STAMP    := $(MUSL)/.complete
CC            := $(GLIBC_CC) -specs=$(abspath $(MUSL))/musl-gcc.specs
TARGET_CPPFLAGS :=
TARGET_LDFLAGS  := -static
endif

OPT-y                      := -O2
OPT-$(CONFIG_OPTIMIZE_SIZE) := -Os
CPPFLAGS := -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DEDGEPROF_VERSION='"$(VERSION)"' -I. -I$(O) -I$(O)/include \
	    -include $(O)/include/generated/autoconf.h -include kconfig/kconfig.h \
	    $(TARGET_CPPFLAGS)
CFLAGS   := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
	    $(OPT-y) -g -fno-omit-frame-pointer -ffunction-sections -fdata-sections -MMD -MP
LDFLAGS  := -Wl,--gc-sections $(TARGET_LDFLAGS)
PIC_CPPFLAGS := $(CPPFLAGS) $(if $(MUSL),$(GLIBC_CPPFLAGS))
PIC_LDFLAGS  := -Wl,--gc-sections $(GLIBC_LDFLAGS)
LDFLAGS-static-$(CONFIG_STATIC) := -static

ifneq ($(SAN),)
CFLAGS   += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=address,undefined
PIC_LDFLAGS += -fsanitize=address,undefined
LDFLAGS-static-y :=
endif

# ---------------------------------------------------------------------------------------------
# What each area contributes. An area's Build.mk appends to:
#   bin-y                 binaries;  <bin>-objs, <bin>-ldlibs
#   lib-y                 shared libraries (objects built -fPIC under $(O)/pic/); <lib>-objs
#   unit-tests-y          cmocka tests tests/unit/<area>/<name>-test.c; <name>-test-objs, -ldlibs
#   progs-y               test programs under $(O) (drivers, probes); <name>-objs, -ldflags, -ldlibs
#   fuzz-y                libFuzzer targets tests/fuzz/<name>.c; <name>-fuzz-objs, -fuzz-ldlibs
#   generated-y           generated headers every object waits for
#   install-y             extra install commands (a make function of the destination)

bin-y :=
lib-y :=
unit-tests-y :=
unit-tests-glibc :=
progs-y :=
generated-y :=
fuzz-y :=
comma := ,
include $(sort $(wildcard */Build.mk */Build-*.mk))

bins      := $(addprefix $(O)/,$(bin-y))
libs      := $(addprefix $(O)/,$(lib-y))
unittests := $(addprefix $(O)/tests/unit/,$(addsuffix -test,$(unit-tests-y)))

all: $(bins) $(libs)
	@echo "  BUILT    $(O): $(notdir $(bins) $(libs))"

$(O)/%.o: %.c $(O)/include/config/auto.conf | $(generated-y) $(MUSL_STAMP)
	$(quiet) CC $@
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) $(CFLAGS_$(notdir $*)) -c -o $@ $<

$(O)/%.o: $(O)/%.c $(O)/include/config/auto.conf | $(generated-y) $(MUSL_STAMP)
	$(quiet) CC $@
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(O)/pic/%.o: %.c $(O)/include/config/auto.conf | $(generated-y)
	$(quiet) CC-PIC $@
	@mkdir -p $(dir $@)
	$(Q)$(GLIBC_CC) $(PIC_CPPFLAGS) $(CFLAGS) $(CFLAGS_$(notdir $*)) -fPIC -fvisibility=hidden \
		-c -o $@ $<

$(O)/pic/%.o: $(O)/%.c $(O)/include/config/auto.conf | $(generated-y)
	$(quiet) CC-PIC $@
	@mkdir -p $(dir $@)
	$(Q)$(GLIBC_CC) $(PIC_CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

# The one link recipe: $(call link,DRIVER,FLAGS,LIBRARIES) links the rule's prerequisites.
define link
$(quiet) LD $@
@mkdir -p $(dir $@)
$(Q)$(1) $(2) -o $@ $^ $(3)
endef

# Binaries link to <bin>.debug (kept for symbolization on the build host) and ship stripped.
define bin_rule
$(O)/$(1).debug: $$(addprefix $(O)/,$$($(1)-objs))
	$$(call link,$$(CC),$$(LDFLAGS) $$(LDFLAGS-static-y),$$($(1)-ldlibs))
$(O)/$(1): $(O)/$(1).debug
	$$(quiet) STRIP $$@
	$(Q)$$(STRIP) -o $$@ $$<
endef
$(foreach b,$(bin-y),$(eval $(call bin_rule,$(b))))

define lib_rule
$(O)/$(1).debug: $$(addprefix $(O)/pic/,$$($(1)-objs))
	$$(call link,$$(GLIBC_CC),$$(PIC_LDFLAGS) -shared -Wl$$(comma)-soname$$(comma)$(1),$$($(1)-ldlibs))
$(O)/$(1): $(O)/$(1).debug
	$$(quiet) STRIP $$@
	$(Q)$$(STRIP) --strip-unneeded -o $$@ $$<
endef
$(foreach l,$(lib-y),$(eval $(call lib_rule,$(l))))

# Unit tests link dynamically (cmocka ships no static library) with only the objects they list;
# on musl boards statically, with tools/musl.sh's cmocka. The tests of code that only
# libedgeprof.so runs (unit-tests-glibc: its unwinder) are built as it is, by GLIBC_CC from the
# -fPIC objects.
# A test's source mirrors its module's folder: tests/unit/<area>/<name>-test.c.
unit-src = $(firstword $(wildcard $(addsuffix /$(1)-test.c,tests/unit tests/unit/* tests/unit/*/*)))
define unit_rule
$(O)/tests/unit/$(1)-test: $(O)/$(patsubst %.c,%.o,$(call unit-src,$(1))) $$(addprefix $(O)/,$$($(1)-test-objs))
	$$(call link,$$(CC),$$(LDFLAGS),$$($(1)-test-ldlibs) -lcmocka)
endef
define unit_glibc_rule
$(O)/tests/unit/$(1)-test: $(O)/pic/$(patsubst %.c,%.o,$(call unit-src,$(1))) $$(addprefix $(O)/pic/,$$($(1)-test-objs))
	$$(call link,$$(GLIBC_CC),$$(PIC_LDFLAGS),$$($(1)-test-ldlibs) -lcmocka)
endef
$(foreach t,$(filter-out $(unit-tests-glibc),$(unit-tests-y)),$(eval $(call unit_rule,$(t))))
$(foreach t,$(filter $(unit-tests-glibc),$(unit-tests-y)),$(eval $(call unit_glibc_rule,$(t))))

# Test programs (drivers, probes; not installed): progs-y lists paths under $(O), each linked from
# <name>-objs with <name>-ldflags and <name>-ldlibs (name = the path's last part).
define prog_rule
$(O)/$(1): $$(addprefix $(O)/,$$($(notdir $(1))-objs))
	$$(call link,$$(CC),$$(LDFLAGS) $$($(notdir $(1))-ldflags),$$($(notdir $(1))-ldlibs))
endef
$(foreach p,$(progs-y),$(eval $(call prog_rule,$(p))))
all-tests: $(addprefix $(O)/,$(progs-y))

-include $(shell find $(O) -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------------------------------------
# Set-up: Debian packages and, for ARM boards, the cross toolchain and a sysroot from .debs.

# SETUP_STAMP is set at the top (before anything that needs kconfiglib).
$(SETUP_STAMP): tools/setup.sh $(wildcard tools/deps/*.list tools/deps/*.target-list)
	$(Q)if [ -z "$(SETUP_SKIP)" ]; then tools/setup.sh $(call setup-args,$@); fi
	@mkdir -p build && touch $@

# The musl toolchain and libraries of a static board, from Debian's packages and sources, once
# per version (tools/musl.sh; a no-op when build/musl-<arch>/.complete matches).
ifneq ($(MUSL_STAMP),)
$(MUSL_STAMP): tools/musl.sh | $(SETUP_STAMP)
	$(quiet) MUSL $(MUSL)
	$(Q)tools/musl.sh --arch $(ARCH)
endif

setup:
	$(Q)rm -f build/.setup-*.stamp
	$(Q)tools/setup.sh --arch $(SETUP_ARCH)
	@mkdir -p build && touch $(call setup-stamp,test)

# ---------------------------------------------------------------------------------------------
# Tests.

test: $(SETUP_STAMP)
	$(Q)$(MAKE) --no-print-directory all-tests
	$(Q)tools/run-tests.sh "$(O)" "$(ARCH)" "$(RUN_TARGET)" $(unittests)

all-tests: all $(unittests)

# What the host's `make test` cannot run without the ARM boards' builds (they skip there and say
# so): both boards set up, built and unit-tested under qemu-user, then those host tests, none
# allowed to skip. Names match as substrings: bpf-arm64-vm is also bpf-arm64-vm-5.10.
ARM_HOST_TESTS := bpf-arm64-vm bpf-qemu transport-qemu sigprof-armv7 sigprof-arm64 snapshot-armv7
test-arm:
	$(Q)$(MAKE) --no-print-directory BOARD=gateway-arm64 O=build/gateway-arm64 test
	$(Q)$(MAKE) --no-print-directory BOARD=gateway-armv7 O=build/gateway-armv7 test
	$(Q)$(MAKE) --no-print-directory BOARD=host-x86_64 O=build/host-x86_64 all-tests
	$(Q)ONLY="$(ARM_HOST_TESTS)" NO_SKIP=1 tools/run-tests.sh build/host-x86_64 x86_64 ""

testconfigs: $(SETUP_STAMP)
	$(Q)tools/testconfigs.sh

# BusyBox-style size table from per-feature builds under build/size/ (tools/size.sh).
size:
	$(Q)tools/size.sh $(BOARDS)

size-check:
	$(Q)tools/size.sh --check $(BOARDS)

fuzz: $(SETUP_STAMP)
	$(Q)tools/run-fuzz.sh $(fuzz-y)

# What tools/run-fuzz.sh builds a target from: the sources of its objects (generated ones under
# $(O)) and its libraries, one target a line ("name: sources... -llibs...").
fuzz-src = $(foreach o,$(1),$(if $(wildcard $(o:.o=.c)),$(o:.o=.c),$(O)/$(o:.o=.c)))
fuzz-srcs:
	@$(foreach f,$(fuzz-y),echo '$(f): $(call fuzz-src,$($(f)-fuzz-objs)) $($(f)-fuzz-ldlibs)';)

# ---------------------------------------------------------------------------------------------
# Install: binaries, library, public header.

install: all
	$(Q)install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include
	$(Q)for b in $(bins); do install -m 0755 $$b $(DESTDIR)$(PREFIX)/bin/; done
	$(Q)for l in $(libs); do install -m 0755 $$l $(DESTDIR)$(PREFIX)/lib/; done
	$(Q)$(foreach i,$(install-y),$(call $(i),$(DESTDIR),$(PREFIX));)
	@echo "  INSTALL  $(DESTDIR)$(PREFIX)"

# The demo's build is one line (V=1: every step) and uses every CPU unless -j was given.
demo-build := build/host-x86_64
demo: $(SETUP_STAMP)
	$(Q)$(MAKE) --no-print-directory $(if $(filter 1,$(V)),,-s) \
		$(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) \
		$(if $(filter 1,$(V)),,quiet=@true) BOARD=host-x86_64 O=$(demo-build) all \
		$(demo-build)/tests/drivers/push-dir $(demo-build)/tests/workloads/split
	$(Q)tools/demo.sh $(demo-build)

demo-fleet: $(SETUP_STAMP)
	$(Q)$(MAKE) --no-print-directory BOARD=host-x86_64 O=build/host-x86_64 all all-tests
	$(Q)tools/demo-fleet.sh build/host-x86_64

clean:
	$(Q)rm -rf $(O)

distclean:
	$(Q)rm -rf build

help:
	@sed -n '3,16p' Makefile | sed 's/^# \{0,1\}//'

.PHONY: all test test-arm all-tests testconfigs size size-check fuzz fuzz-srcs install demo demo-fleet clean distclean help \
	setup defconfig olddefconfig menuconfig savedefconfig allnoconfig allyesconfig
