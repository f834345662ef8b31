# SPDX-License-Identifier: MIT
# port/ networking: sockets, HTTP/1.1 framing, mutual TLS (mbedtls 2.28), certificate writer.
port-net-y      := port/net.o port/http.o port/tls.o port/tls-cert.o
# One GET of a URL (the scrapers): linked by those who scrape.
port-fetch-y    := port/fetch.o
unit-tests-y    += fetch
fetch-test-objs  = port/fetch.o port/tls.o port/net.o port/http.o $(port-y)
fetch-test-ldlibs = $(port-net-ldlibs)
port-net-ldlibs  = -lmbedtls -lmbedx509 -lmbedcrypto -lpthread

unit-tests-y    += http tls
http-test-objs   = port/http.o
tls-test-objs    = port/tls.o port/tls-cert.o port/net.o port/http.o $(port-y)
tls-test-ldlibs  = $(port-net-ldlibs)

# libFuzzer target of the HTTP parser (tests/fuzz/http-parser.c; make fuzz).
fuzz-y          += http-parser
