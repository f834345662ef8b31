// SPDX-License-Identifier: MIT
/*
 * tests/unit/store/symbols/dwarf-line-fixture.c — built with -gdwarf-5 and -gdwarf-4 (-O0, -no-pie, so the
 * printed addresses are the link-time ones the line table holds). It prints "ADDRESS LINE" for
 * instructions whose source line it knows; dwarf-line-test looks them up in its own line table.
 */
#include <stdio.h>

/* gcc puts a function's first row on its opening brace. */
static const int where_line = __LINE__ + 2;
__attribute__((noinline)) static void *where(void)
{
	return __builtin_return_address(0);
}

__attribute__((noinline)) static int second_call(int x)
{
	void *here = where(); int line = __LINE__;

	printf("%p %d\n", (void *)((char *)here - 1), line);
	return x + 1;
}

int main(void)
{
	void *here = where(); int line = __LINE__;

	printf("%p %d\n", (void *)where, where_line);
	printf("%p %d\n", (void *)((char *)here - 1), line);
	return second_call(1) == 2 ? 0 : 1;
}
