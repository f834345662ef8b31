// SPDX-License-Identifier: MIT
#include <string.h>

#include "store/ui/ui.h"

const struct ui_asset *ui_asset_find(const char *path)
{
	if (!strcmp(path, "/") || !strcmp(path, "/ui/") || !strcmp(path, "/ui"))
		path = "/ui/index.html";
	for (const struct ui_asset *a = ui_assets; a->path; a++)
		if (!strcmp(a->path, path))
			return a;
	return NULL;
}
