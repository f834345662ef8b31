# SPDX-License-Identifier: MIT
# port/ — the porting layer: nothing above it calls the OS for clocks, files, sockets or TLS.
port-y := port/clock.o port/rand.o port/file.o port/log.o port/text.o

unit-tests-y    += clock rand file text
clock-test-objs := port/clock.o
rand-test-objs  := port/rand.o port/clock.o
file-test-objs  := port/file.o
text-test-objs  := port/text.o port/log.o port/clock.o
