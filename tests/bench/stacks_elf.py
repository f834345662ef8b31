# SPDX-License-Identifier: MIT
"""Names a code address the same way for every profiler compared by stacks-compare.py.

A frame is (file, file offset). Its function is the sized .symtab/.dynsym symbol covering it,
else the start of its unwind entry (.eh_frame_hdr's table, or .ARM.exidx on 32-bit ARM):
"file+0xSTART", else "file?" (code with no table). Read straight from the ELF file, so neither
profiler's own naming enters the comparison. ELF32/ELF64, little-endian.
"""
import bisect
import os
import struct

PT_LOAD, PT_GNU_EH_FRAME, PT_ARM_EXIDX = 1, 0x6474E550, 0x70000001
SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_FUNC, STT_GNU_IFUNC = 2, 10


class Elf:
    def __init__(self, path):
        self.path, self.short = path, os.path.basename(path)
        with open(path, "rb") as f:
            self.data = d = f.read()
        if d[:4] != b"\x7fELF":
            raise ValueError(path + ": not ELF")
        self.is64 = d[4] == 2
        if self.is64:
            (phoff, shoff) = struct.unpack_from("<QQ", d, 0x20)
            (phentsize, phnum, shentsize, shnum) = struct.unpack_from("<HHHH", d, 0x36)
        else:
            (phoff, shoff) = struct.unpack_from("<II", d, 0x1C)
            (phentsize, phnum, shentsize, shnum) = struct.unpack_from("<HHHH", d, 0x2A)
        self.loads, self.starts = [], []
        for i in range(phnum):
            o = phoff + i * phentsize
            if self.is64:
                typ, _fl, off, va, _pa, fsz, _msz = struct.unpack_from("<IIQQQQQ", d, o)
            else:
                typ, off, va, _pa, fsz, _msz = struct.unpack_from("<IIIIII", d, o)
            if typ == PT_LOAD:
                self.loads.append((off, va, fsz))
            elif typ == PT_GNU_EH_FRAME:
                self._eh_hdr(va)
            elif typ == PT_ARM_EXIDX:
                self._exidx(va, fsz)
        self.starts.sort()
        self.syms = []
        secs = []
        for i in range(shnum if shoff else 0):
            o = shoff + i * shentsize
            if self.is64:
                _n, typ, _f, _a, off, size, link, _i, _al, esz = struct.unpack_from(
                    "<IIQQQQIIQQ", d, o)
            else:
                _n, typ, _f, _a, off, size, link, _i, _al, esz = struct.unpack_from(
                    "<IIIIIIIIII", d, o)
            secs.append((typ, off, size, link, esz))
        for want in (SHT_SYMTAB, SHT_DYNSYM):  # both: .dynsym names what .symtab lost
            for typ, off, size, link, esz in secs:
                if typ == want and esz:
                    self._symtab(off, size, esz, secs[link])
        self.syms.sort()
        self.sym_addrs = [s[0] for s in self.syms]

    def _off(self, va):
        for off, lva, fsz in self.loads:
            if lva <= va < lva + fsz:
                return va - lva + off
        return None

    def _eh_hdr(self, va):
        o, d = self._off(va), self.data
        if o is None or d[o] != 1 or d[o + 2] != 0x03 or d[o + 3] != 0x3B:
            return
        n = struct.unpack_from("<I", d, o + 8)[0]
        for i in range(n):
            loc = struct.unpack_from("<i", d, o + 12 + 8 * i)[0]
            self.starts.append(va + loc)

    def _exidx(self, va, size):
        o, d = self._off(va), self.data
        for i in range(size // 8):
            w = struct.unpack_from("<I", d, o + 8 * i)[0]
            rel = w & 0x7FFFFFFF
            rel = rel - 0x80000000 if rel & 0x40000000 else rel
            self.starts.append((va + 8 * i + rel) & 0xFFFFFFFF)

    def _symtab(self, off, size, esz, strsec):
        d, stroff = self.data, strsec[1]
        for i in range(size // esz):
            o = off + i * esz
            if self.is64:
                name, info, _o, shndx, value, sz = struct.unpack_from("<IBBHQQ", d, o)
            else:
                name, value, sz, info, _o, shndx = struct.unpack_from("<IIIBBH", d, o)
            if (info & 15) not in (STT_FUNC, STT_GNU_IFUNC) or shndx == 0 or not value:
                continue
            end = d.index(b"\0", stroff + name)
            nm = d[stroff + name:end].decode("latin-1")
            if not self.is64:
                value &= ~1
            self.syms.append((value, sz, nm))

    def vaddr(self, off):
        for foff, va, fsz in self.loads:
            if foff <= off < foff + fsz:
                return off - foff + va
        return None

    def function(self, off):
        """Function id of file offset off."""
        va = self.vaddr(off)
        if va is None:
            return f"{self.short}?"
        i = bisect.bisect_right(self.sym_addrs, va) - 1
        a = self.sym_addrs[i] if i >= 0 else None
        while i >= 0 and self.sym_addrs[i] == a:  # aliases at one address
            _a, sz, nm = self.syms[i]
            if va < a + sz or sz == 0:
                return nm
            i -= 1
        j = bisect.bisect_right(self.starts, va) - 1
        if j >= 0:
            return f"{self.short}+{self.starts[j]:#x}"
        return f"{self.short}?"


_cache = {}


def function(path, off, root=""):
    """Function id of (path, file offset); root is a sysroot prefix for cross files."""
    if path.startswith("["):
        return path  # [vdso] and the like: the module is the function
    full = root + path if root and not os.path.exists(path) else path
    if root and os.path.exists(root + path):
        full = root + path
    e = _cache.get(full)
    if e is None:
        try:
            e = Elf(full)
        except (OSError, ValueError, struct.error, IndexError):
            e = False
        _cache[full] = e
    if not e:
        return os.path.basename(path) + "?"
    return e.function(off)
