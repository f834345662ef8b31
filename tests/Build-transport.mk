# SPDX-License-Identifier: MIT
# tests/drivers/push-dir: pushes a directory of .pb.gz files through agent/transport (tests,
# demo, benchmarks; cross-built to prove the transport on the target architectures). Lives
# here, after port/ and store/ in the include order, because its prerequisites are expanded
# when the rule is read.
ifeq ($(CONFIG_UPLOAD_MTLS),y)
push-expired-y := tests/drivers/push-expired.o port/tls-cert.o
push-expired-$(CONFIG_TLS_MINIMAL) := tests/drivers/push-expired-none.o
push-dir-objs = tests/drivers/push-dir.o $(push-expired-y) $(agent-transport-objs) $(port-y)
push-dir-ldflags = $(LDFLAGS-static-y)
push-dir-ldlibs  = $(agent-transport-ldlibs)
progs-y += tests/drivers/push-dir
endif
