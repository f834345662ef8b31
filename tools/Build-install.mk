# SPDX-License-Identifier: MIT
# make install: a device's config file, systemd units and the BusyBox/OpenWrt init script.
# Called by the top Makefile as $(call install-transport,DESTDIR,PREFIX) inside its recipe: one
# shell line. The config file is never overwritten (a device's own settings and certificates
# win); init files are.
install-y += install-transport
install-transport = install -d -m 0755 $(1)/etc/edgeprof $(1)$(2)/lib/systemd/system \
	$(1)/etc/init.d $(1)$(2)/share/doc/edgeprof && \
	install -d -m 0700 $(1)/var/lib/edgeprof && \
	{ [ -e $(1)/etc/edgeprof/edgeprof-agent.conf ] || \
	  install -m 0640 tools/install/edgeprof-agent.conf $(1)/etc/edgeprof/; } && \
	install -m 0644 tools/install/edgeprof-agent.service $(1)$(2)/lib/systemd/system/ && \
	install -m 0644 tools/install/edgeprof-collector.service $(1)$(2)/lib/systemd/system/ && \
	install -m 0755 tools/install/edgeprof-agent.init $(1)/etc/init.d/edgeprof-agent && \
	{ [ ! -e docs/transport.md ] || install -m 0644 docs/transport.md $(1)$(2)/share/doc/edgeprof/; }
