# SPDX-License-Identifier: MIT
# port/ networking: sockets, HTTP/1.1 framing, mutual TLS (mbedtls 2.28), certificate writer.
# port-tls-y is the client's part (the agent); the programs that serve TLS or write
# certificates (collector, CLI, tests) add tls-server.o and tls-cert.o.
port-tls-y      := port/net.o port/http.o port/tls.o
port-net-y      := $(port-tls-y) port/tls-server.o port/tls-cert.o
port-net-ldlibs  = $(or $(MBEDTLS_LIB),-lmbedtls -lmbedx509 -lmbedcrypto) -lpthread
# One GET of a URL (the scrapers): linked by those who scrape.
port-fetch-y    := port/fetch.o
unit-tests-y    += fetch
fetch-test-objs  = port/fetch.o $(port-tls-y) $(port-y)
fetch-test-ldlibs = $(port-net-ldlibs)

# musl boards build mbedtls from Debian's source with a configuration from their Kconfig
# (tools/mbedtls-config.sh: minimal with CONFIG_TLS_MINIMAL, else mbedtls's default), cached
# per configuration by tools/mbedtls.sh. Every object sees the same header.
ifeq ($(CONFIG_LIBC_MUSL)$(CONFIG_UPLOAD_MTLS),yy)
MBEDTLS_CONFIG := $(O)/include/generated/edgeprof-mbedtls-config.h
MBEDTLS_LIB    := $(O)/mbedtls/libmbedtls.a
CPPFLAGS       += -I$(MUSL)/mbedtls/include -I$(O)/include/generated \
		  -DMBEDTLS_CONFIG_FILE='"edgeprof-mbedtls-config.h"'
generated-y    += $(MBEDTLS_CONFIG) $(MBEDTLS_LIB)
$(MBEDTLS_CONFIG): tools/mbedtls-config.sh $(O)/include/config/auto.conf
	$(quiet) GEN $@
	$(Q)tools/mbedtls-config.sh $(O)/include/config/auto.conf >$@.tmp && mv $@.tmp $@
$(MBEDTLS_LIB): $(MBEDTLS_CONFIG) tools/mbedtls.sh | $(MUSL_STAMP)
	$(quiet) MBEDTLS $@
	$(Q)tools/mbedtls.sh $(MUSL) $< $@ $(CC)
endif

# The unit tests run a server and write certificates: not with the client-only mbedtls.
ifneq ($(CONFIG_TLS_MINIMAL),y)
unit-tests-y    += tls
endif
unit-tests-y    += http
http-test-objs   = port/http.o
tls-test-objs    = $(port-net-y) $(port-y)
tls-test-ldlibs  = $(port-net-ldlibs)

# libFuzzer target of the HTTP parser (tests/fuzz/http-parser.c; make fuzz).
fuzz-y          += http-parser
http-parser-fuzz-objs = port/http.o
