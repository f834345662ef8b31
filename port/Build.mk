# SPDX-License-Identifier: MIT
# port/ — the porting layer: nothing above it calls the OS for clocks, files, sockets or TLS.
port-y := port/clock.o port/rand.o port/file.o port/log.o port/text.o

unit-tests-y    += clock rand file text hash
clock-test-objs := port/clock.o
rand-test-objs  := port/rand.o port/clock.o
file-test-objs  := port/file.o
text-test-objs  := port/text.o port/log.o port/clock.o

# The ring file (a circular log of CRC-framed records): the collector's store and the agent's
# offline spool both link it, so it lives below both.
port-ring-y := port/ringfile.o port/crc32c.o
unit-tests-y         += ringfile
ringfile-test-objs   := $(port-ring-y) $(port-y)
ringfile-test-ldlibs := -lpthread
# make fuzz: any file as a ring file.
fuzz-y += store-ringfile
store-ringfile-fuzz-objs   = $(port-ring-y) $(port-y)
store-ringfile-fuzz-ldlibs = -lpthread
