/* SPDX-License-Identifier: MIT */
/*
 * IS_ENABLED(CONFIG_X): 1 when the bool symbol is set, else 0 — usable in plain `if`, so the
 * disabled branch is still type-checked and then removed by the compiler (kernel idiom).
 * Included before every source file, after generated/autoconf.h.
 */
#ifndef EDGEPROF_KCONFIG_H
#define EDGEPROF_KCONFIG_H

#define __EP_ARG_PLACEHOLDER_1 0,
#define __ep_take_second_arg(__ignored, val, ...) val
#define __ep_is_defined(x) ___ep_is_defined(x)
#define ___ep_is_defined(val) ____ep_is_defined(__EP_ARG_PLACEHOLDER_##val)
#define ____ep_is_defined(arg1_or_junk) __ep_take_second_arg(arg1_or_junk 1, 0)

#define IS_ENABLED(option) __ep_is_defined(option)

#endif /* EDGEPROF_KCONFIG_H */
