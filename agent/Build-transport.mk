# SPDX-License-Identifier: MIT
# agent/ transport: mTLS upload, offline spool (port/ringfile on flash), retry/backoff.
# Included before agent/Build.mk (sort order), so everything here that names other areas'
# variables uses deferred '='. The lead links $(agent-transport-y) into edgeprof-agent.
agent-transport-$(CONFIG_UPLOAD_MTLS) += agent/transport/upload.o agent/transport/transport.o
agent-transport-$(CONFIG_SPOOL)       += agent/transport/spool.o
# Nothing (not even port/tls.o and mbedtls) without CONFIG_UPLOAD_MTLS.
agent-transport-objs    = $(if $(CONFIG_UPLOAD_MTLS),$(agent-transport-y) $(port-tls-y) \
			  $(if $(CONFIG_SPOOL),$(port-ring-y)))
agent-transport-ldlibs  = $(if $(CONFIG_UPLOAD_MTLS),$(port-net-ldlibs))

# The unit tests of upload and transport run a TLS server in-process (tests/lib/upload-peer.h):
# not with the client-only mbedtls (CONFIG_TLS_MINIMAL), where tests/integration/transport-qemu
# and transport-musl push through the real agent code to the collector and to openssl s_server.
ifeq ($(CONFIG_UPLOAD_MTLS)$(CONFIG_TLS_MINIMAL),y)
unit-tests-y          += upload
unit-tests-$(CONFIG_SPOOL) += transport
endif
upload-test-objs       = agent/transport/upload.o $(port-net-y) $(port-y)
upload-test-ldlibs     = $(port-net-ldlibs) -lpthread
transport-test-objs    = $(agent-transport-objs) port/tls-server.o port/tls-cert.o $(port-y)
transport-test-ldlibs  = $(port-net-ldlibs) -lpthread

ifeq ($(CONFIG_SPOOL),y)
unit-tests-y      += spool
spool-test-objs    = agent/transport/spool.o $(port-ring-y) $(port-y)
spool-test-ldlibs  = -lpthread
endif
