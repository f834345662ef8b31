# SPDX-License-Identifier: MIT
# tools/ — the `edgeprof` analysis CLI (tools/cli/, see tools/cli/cli.h).
#
# Commands register themselves (CLI_COMMAND in cli.h): another area adds one by appending its
# object to cli-y (and its libraries to cli-ldlibs) in its own Build*.mk; nothing here changes.
# The reusable parts (stacks, tree, flame, units) have no CLI I/O; cli-lib-y lists them.

cli-lib-y := pprof/view/stacks.o pprof/view/tree.o pprof/view/flame.o pprof/view/units.o
cli-y     += tools/cli/main.o tools/cli/common.o $(cli-lib-y) \
	     tools/cli/info.o tools/cli/top.o tools/cli/merge.o tools/cli/folded.o \
	     tools/cli/flamegraph.o tools/cli/diff.o
cli-ldlibs += -lm

bin-$(CONFIG_TOOLS) += edgeprof
edgeprof-objs   = $(cli-y) $(pprof-y) $(pprof-folded-y) $(port-y)
edgeprof-ldlibs = $(cli-ldlibs) $(pprof-ldlibs)

# Unit tests of the reusable modules run on every board (they are plain C: 32-bit ARM included).
unit-tests-y         += cli-units cli-stacks cli-tree cli-flame
cli-units-test-objs  = pprof/view/units.o
cli-units-test-ldlibs = -lm
cli-stacks-test-objs = pprof/view/stacks.o
cli-tree-test-objs   = pprof/view/tree.o pprof/view/stacks.o
cli-flame-test-objs  = pprof/view/flame.o pprof/view/tree.o pprof/view/stacks.o pprof/view/units.o
cli-flame-test-ldlibs = -lm
