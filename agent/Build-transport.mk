# SPDX-License-Identifier: MIT
# agent/ transport: mTLS upload, offline spool (port/ringfile on flash), retry/backoff.
# Included before agent/Build.mk (sort order), so everything here that names other areas'
# variables uses deferred '='. The lead links $(agent-transport-y) into edgeprof-agent.
agent-transport-$(CONFIG_UPLOAD_MTLS) += agent/upload.o agent/transport.o
agent-transport-$(CONFIG_SPOOL)       += agent/spool.o
# Nothing (not even port/tls.o and mbedtls) without CONFIG_UPLOAD_MTLS.
agent-transport-objs    = $(if $(CONFIG_UPLOAD_MTLS),$(agent-transport-y) $(port-net-y) \
			  $(if $(CONFIG_SPOOL),$(port-ring-y)))
agent-transport-ldlibs  = $(if $(CONFIG_UPLOAD_MTLS),$(port-net-ldlibs))

ifeq ($(CONFIG_UPLOAD_MTLS),y)
# tests/Build-transport.mk builds tests/drivers/push-dir from these objects.
unit-tests-y          += upload
upload-test-objs       = agent/upload.o $(port-net-y) $(port-y)
upload-test-ldlibs     = $(port-net-ldlibs) -lpthread
transport-test-objs    = $(agent-transport-objs) $(port-y)
transport-test-ldlibs  = $(port-net-ldlibs) -lpthread
endif

ifeq ($(CONFIG_SPOOL),y)
unit-tests-y      += spool transport
spool-test-objs    = agent/spool.o $(port-ring-y) $(port-y)
spool-test-ldlibs  = -lpthread
endif
