# SPDX-License-Identifier: MIT
# elf/ — reading ELF files: build-ids, load segments, symbols (elf/elf.o) and call frame
# information (elf/cfi.o). Below its users: the agent (both samplers), the collector's debug-file
# store and the CLI name these objects in their own lists; nothing here includes a header from
# agent/, store/ or tools/.

fuzz-y += cfi ehabi armframe a64frame dwcfi
dwcfi-fuzz-objs = elf/dwcfi.o
armframe-fuzz-objs = elf/armframe.o
a64frame-fuzz-objs = elf/a64frame.o
cfi-fuzz-objs   = elf/cfi.o
ehabi-fuzz-objs = elf/ehabi.o

unit-tests-y += cfi
cfi-test-objs = elf/cfi.o elf/elf.o port/file.o

unit-tests-y += ehabi armframe a64frame dwcfi
dwcfi-test-objs = elf/dwcfi.o
# the hand-made functions on every board; the comparison with .eh_frame where cfi.o reads aarch64
a64frame-test-objs = elf/a64frame.o elf/cfi.o
armframe-test-objs = elf/armframe.o elf/ehabi.o
ehabi-test-objs = elf/ehabi.o
