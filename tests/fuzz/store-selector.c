// SPDX-License-Identifier: MIT
/* tests/fuzz/store-selector.c — any text as a selector (both modes) and as a time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/query/selector.h"
#include "store/query/timeparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct record_label l[] = { { "env", "prod" }, { "region", "eu-west" } };
	char *s = malloc(size + 1), err[256];
	struct selector *sel;
	int64_t ns;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	for (unsigned flags = 0; flags <= SELECTOR_F_INGEST; flags++) {
		if (selector__parse(s, flags, &sel, err, sizeof(err)) == 0) {
			const char *name, *value;
			enum selector_op op;

			selector__match(sel, "svc", "dev", l, 2);
			for (size_t i = 0; i < selector__n_matchers(sel); i++) {
				if (selector__matcher(sel, i, &name, &op, &value))
					abort();
				if (!name || !value)
					abort();
			}
			selector__free(sel);
		} else if (!strstr(err, "selector: ")) {
			abort(); /* every error says what it is */
		}
	}
	if (timeparse(s, 1700000000000000000LL, &ns, err, sizeof(err)) && !strstr(err, "time: "))
		abort();
	free(s);
	return 0;
}
