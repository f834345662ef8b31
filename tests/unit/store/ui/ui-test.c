// SPDX-License-Identifier: MIT
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "store/ui/ui.h"

static void index_is_served_for_root(void **state)
{
	const struct ui_asset *a = ui_asset_find("/");

	assert_non_null(a);
	assert_string_equal(a->path, "/ui/index.html");
	assert_non_null(strstr(a->content_type, "text/html"));
	assert_non_null(memmem(a->data, a->len, "<canvas id=\"flame\"", 18));
}

static void scripts_and_styles_have_types(void **state)
{
	const struct ui_asset *js = ui_asset_find("/ui/app.js"), *css = ui_asset_find("/ui/style.css");

	assert_non_null(js);
	assert_non_null(css);
	assert_non_null(strstr(js->content_type, "javascript"));
	assert_non_null(strstr(css->content_type, "text/css"));
	assert_non_null(memmem(js->data, js->len, "function layout", 15));
}

static void unknown_paths_are_not_found(void **state)
{
	assert_null(ui_asset_find("/ui/../etc/passwd"));
	assert_null(ui_asset_find("/ui/nope.js"));
	assert_null(ui_asset_find(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(index_is_served_for_root),
		cmocka_unit_test(scripts_and_styles_have_types),
		cmocka_unit_test(unknown_paths_are_not_found),
	};
	return cmocka_run_group_tests_name("store/ui", tests, NULL, NULL);
}
