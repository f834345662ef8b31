# SPDX-License-Identifier: MIT
# tools/cli/ commands that talk to the network: certs (mbedtls x509 writer), query and ls
# (mutual-TLS client of the collector).
cli-y      += tools/cli/certs.o tools/cli/client.o tools/cli/query.o tools/cli/debuginfo.o \
	      tools/cli/regressions.o \
	      elf/elf.o $(port-net-y)
cli-ldlibs += $(port-net-ldlibs)
