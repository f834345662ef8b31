# SPDX-License-Identifier: MIT
# agent/ — the device daemon and the in-process sampler.
agent-y := agent/main.o agent/features.o agent/ring.o

bin-y                  += edgeprof-agent
edgeprof-agent-objs    = $(agent-y) $(port-y)
edgeprof-agent-ldlibs  =

unit-tests-y    += ring
ring-test-objs  = agent/ring.o
ring-test-ldlibs = -lpthread
