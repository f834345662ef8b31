#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""One entry point for every configuration verb, on top of Debian's kconfiglib.

Run with /usr/bin/python3: a pyenv python3 on PATH cannot see Debian's modules.

  kconfig.py defconfig     CONFIG DEFCONFIG [SYM=VAL ...]  .config from a board's defconfig
  kconfig.py olddefconfig  CONFIG                  new symbols take their defaults
  kconfig.py savedefconfig CONFIG OUT              minimal defconfig (only what differs)
  kconfig.py allnoconfig   CONFIG [SYM=VAL ...]    everything off, then SYM=VAL applied
  kconfig.py allyesconfig  CONFIG [SYM=VAL ...]
  kconfig.py genconfig     CONFIG AUTOCONF_H AUTO_CONF
  kconfig.py menuconfig    CONFIG
  kconfig.py features      CONFIG                  bool features on that can be turned off
"""
import os
import sys

import kconfiglib

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load():
    os.environ.setdefault("srctree", TOP)
    kconf = kconfiglib.Kconfig(os.path.join(TOP, "kconfig", "Kconfig"), warn_to_stderr=False)
    return kconf


def fail_on_warnings(kconf):
    # A defconfig that sets an unknown symbol or an out-of-range value is a bug: say so loudly.
    bad = [w for w in kconf.warnings if "set more than once" not in w]
    for w in bad:
        print("kconfig: " + w, file=sys.stderr)
    return 1 if bad else 0


def apply_assignments(kconf, assignments):
    for a in assignments:
        name, _, value = a.partition("=")
        name = name[len("CONFIG_"):] if name.startswith("CONFIG_") else name
        sym = kconf.syms.get(name)
        if sym is None:
            sys.exit("kconfig: unknown symbol %s" % name)
        if not sym.set_value(value):
            sys.exit("kconfig: bad value %s for %s" % (value, name))


def all_bools(kconf, value):
    # Like allnoconfig/allyesconfig: every visible bool to value, choices to their default.
    for sym in kconf.unique_defined_syms:
        if sym.orig_type == kconfiglib.BOOL and sym.choice is None:
            sym.set_value(value)
    for choice in kconf.unique_choices:
        choice.unset_value()


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    verb, config = argv[1], argv[2]
    kconf = load()
    if verb == "defconfig":
        kconf.load_config(argv[3])
        rc = fail_on_warnings(kconf)
        if rc:
            return rc
        apply_assignments(kconf, argv[4:])  # make size: the board with one feature off
        kconf.write_config(config, header="# edgeprof .config from %s\n" % argv[3])
    elif verb == "olddefconfig":
        kconf.load_config(config)
        kconf.write_config(config)
    elif verb == "savedefconfig":
        kconf.load_config(config)
        kconf.write_min_config(argv[3])
    elif verb in ("allnoconfig", "allyesconfig"):
        if os.path.exists(config):
            kconf.load_config(config)  # keeps the board's toolchain strings
        all_bools(kconf, 0 if verb == "allnoconfig" else 2)
        apply_assignments(kconf, argv[3:])
        kconf.write_config(config)
    elif verb == "genconfig":
        kconf.load_config(config)
        os.makedirs(os.path.dirname(argv[3]), exist_ok=True)
        os.makedirs(os.path.dirname(argv[4]), exist_ok=True)
        kconf.write_autoconf(argv[3])
        kconf.write_config(argv[4], header="")
    elif verb == "features":
        # tools/size.sh builds the board once per name printed, with that feature off.
        kconf.load_config(config)
        for sym in kconf.unique_defined_syms:
            if (sym.orig_type == kconfiglib.BOOL and sym.choice is None and
                    sym.str_value == "y" and sym.visibility):
                print(sym.name)
    elif verb == "menuconfig":
        import menuconfig
        os.environ["KCONFIG_CONFIG"] = config
        menuconfig.menuconfig(kconf)
    else:
        sys.exit("kconfig: unknown verb %s" % verb)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
