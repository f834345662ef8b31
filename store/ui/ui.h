/* SPDX-License-Identifier: MIT */
/* store/ui/ui.h — the web UI's static files, compiled into the collector (tools/embed.sh). */
#ifndef EDGEPROF_STORE_UI_H
#define EDGEPROF_STORE_UI_H

#include <stddef.h>

struct ui_asset {
	const char *path;         /* "/ui/app.js" */
	const char *content_type;
	const unsigned char *data;
	size_t len;
};

extern const struct ui_asset ui_assets[]; /* terminated by a zeroed entry */

/* The asset served at path ("/" and "/ui/" mean index.html), or NULL. */
const struct ui_asset *ui_asset_find(const char *path);

#endif /* EDGEPROF_STORE_UI_H */
