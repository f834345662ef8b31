# SPDX-License-Identifier: MIT
# store/ — the collector's web UI, embedded in the binary.
ui-files := $(sort $(wildcard store/ui/*.html store/ui/*.js store/ui/*.css))
store-ui-y := store/ui/ui.o store/ui/ui_assets.o

$(O)/store/ui/ui_assets.c: $(ui-files) tools/embed.sh
	$(quiet) EMBED $@
	@mkdir -p $(dir $@)
	$(Q)tools/embed.sh $@ /ui/ $(ui-files)

unit-tests-y   += ui
ui-test-objs    = $(store-ui-y)

# The JSON/flamebearer/folded renderings behind /api/0/render, on the CLI's stack tree.
store-render-y := store/api/render.o pprof/view/stacks.o pprof/view/tree.o port/text.o
unit-tests-y       += render
render-test-objs    = $(store-render-y) $(pprof-y)
render-test-ldlibs  = $(pprof-ldlibs)
