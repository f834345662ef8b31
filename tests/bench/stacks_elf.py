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
        self.loads, self.starts, self.exidx = [], [], None
        phs = []
        for i in range(phnum):
            o = phoff + i * phentsize
            if self.is64:
                typ, _fl, off, va, _pa, fsz, _msz = struct.unpack_from("<IIQQQQQ", d, o)
            else:
                typ, off, va, _pa, fsz, _msz = struct.unpack_from("<IIIIII", d, o)
            phs.append((typ, off, va, fsz))
            if typ == PT_LOAD:
                self.loads.append((off, va, fsz))
        for typ, off, va, fsz in phs:  # the tables once every load segment is known
            if typ == PT_GNU_EH_FRAME:
                self._eh_hdr(va)
            elif typ == PT_ARM_EXIDX:
                self._exidx(va, fsz)
                self.exidx = (va, fsz // 8)
        self.starts.sort()
        self.syms = []
        secs = []
        names = []
        for i in range(shnum if shoff else 0):
            o = shoff + i * shentsize
            if self.is64:
                nm, typ, _f, addr, off, size, link, _i, _al, esz = struct.unpack_from(
                    "<IIQQQQIIQQ", d, o)
            else:
                nm, typ, _f, addr, off, size, link, _i, _al, esz = struct.unpack_from(
                    "<IIIIIIIIII", d, o)
            secs.append((typ, off, size, link, esz))
            names.append((nm, addr, size))
        # .plt, .plt.sec, .plt.got: calls there go to another module; .iplt: to an IFUNC's
        # choice (armhf libc's memcpy)
        self.plt = []
        if secs:
            shstrndx = struct.unpack_from("<H", d, 0x3E if self.is64 else 0x32)[0]
            stroff = secs[shstrndx][1] if shstrndx < len(secs) else 0
            for nm, addr, size in names:
                end = d.find(b"\0", stroff + nm)
                if d[stroff + nm:end].startswith((b".plt", b".iplt")):
                    self.plt.append((addr, addr + size))
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

    def start(self, va):
        """Start (vaddr) of the function holding vaddr va: symbol, else unwind entry."""
        i = bisect.bisect_right(self.sym_addrs, va) - 1
        if i >= 0:
            a, sz, _ = self.syms[i]
            if va < a + sz or sz == 0:
                return a
        j = bisect.bisect_right(self.starts, va) - 1
        return self.starts[j] if j >= 0 else None

    def has_tables(self, va):
        """Whether code at vaddr va has unwind tables: an FDE start at or before it (.eh_frame),
        or an .ARM.exidx entry that is not CANTUNWIND."""
        if self.exidx:
            xva, n = self.exidx
            best = None
            for i in range(n):
                w0, w1 = struct.unpack("<II", self.code(xva + 8 * i, 8))
                rel = w0 & 0x7FFFFFFF
                rel = rel - 0x80000000 if rel & 0x40000000 else rel
                if (xva + 8 * i + rel) & 0xFFFFFFFF <= va:
                    best = w1
            return best is not None and best != 1
        return bool(self.starts) and self.starts[0] <= va

    def code(self, va, n):
        """n bytes of the file at vaddr va, or None."""
        for off, lva, fsz in self.loads:
            if lva <= va and va + n <= lva + fsz:
                return self.data[va - lva + off:va - lva + off + n]
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


def elf(path):
    e = _cache.get(path)
    if e is None:
        try:
            e = Elf(path)
        except (OSError, ValueError, struct.error, IndexError):
            e = False
        _cache[path] = e
    return e


def call_target(path, ra):
    """The call before return address ra (file vaddr) in path: ("direct", target vaddr),
    ("indirect", None), or (None, None) when the instruction there is no call. aarch64 BL/BLR,
    Thumb-2 BL/BLX, ARM BL/BLX, x86_64 call rel32 and call through a register or memory."""
    e = elf(path)
    if not e:
        return None, None
    if e.is64 and e.data[18] == 183:  # EM_AARCH64
        b = e.code(ra - 4, 4)
        if not b:
            return None, None
        w = struct.unpack("<I", b)[0]
        if w & 0xFC000000 == 0x94000000:
            imm = w & 0x3FFFFFF
            imm = imm - (1 << 26) if imm & (1 << 25) else imm
            return "direct", ra - 4 + 4 * imm
        if w & 0xFFFFFC1F == 0xD63F0000:
            return "indirect", None
        return None, None
    if e.is64:  # x86_64
        b = e.code(ra - 7, 7)
        if not b:
            return None, None
        if b[2] == 0xE8:
            return "direct", ra + struct.unpack("<i", b[3:7])[0]
        for k in range(2, 8):  # call *r/m: [REX] ff /2, its length from ModRM (and SIB)
            i = 7 - k
            if b[i] & 0xF0 == 0x40 and i + 1 < 7:
                i += 1
            if i + 1 >= 7 or b[i] != 0xFF or (b[i + 1] >> 3) & 7 != 2:
                continue
            mod, rm = b[i + 1] >> 6, b[i + 1] & 7
            n = 2 + (rm == 4 and mod != 3)
            n += {0: 4 if rm == 5 else 0, 1: 1, 2: 4, 3: 0}[mod]
            if mod == 0 and rm == 4 and i + 2 < 7 and b[i + 2] & 7 == 5:
                n += 4  # SIB without base: disp32
            if i + n == 7:
                return "indirect", None
        return None, None
    if ra & 1:  # Thumb
        ra &= ~1
        b = e.code(ra - 4, 4)
        if not b:
            return None, None
        h1, h2 = struct.unpack("<HH", b)
        if h2 & 0xFF87 == 0x4780:  # blx rN (16 bits)
            return "indirect", None
        if h1 & 0xF800 == 0xF000 and h2 & 0xC000 == 0xC000:
            s_, j1, j2 = (h1 >> 10) & 1, (h2 >> 13) & 1, (h2 >> 11) & 1
            i1, i2 = 1 - (j1 ^ s_), 1 - (j2 ^ s_)
            off = (s_ << 24) | (i1 << 23) | (i2 << 22) | ((h1 & 0x3FF) << 12) | ((h2 & 0x7FF) << 1)
            off = off - (1 << 25) if s_ else off
            if h2 & 0x1000:  # BL: Thumb code (bit 0 says so)
                return "direct", (ra + off) | 1
            return "direct", (ra & ~3) + off  # BLX to ARM code
        return None, None
    b = e.code(ra - 4, 4)
    if not b:
        return None, None
    w = struct.unpack("<I", b)[0]
    if w & 0x0F000000 == 0x0B000000:
        imm = w & 0xFFFFFF
        imm = imm - (1 << 24) if imm & (1 << 23) else imm
        return "direct", ra + 4 + 4 * imm
    if w & 0x0FFFFFF0 == 0x012FFF30:
        return "indirect", None
    return None, None


def tail_calls(path, start, thumb=False):
    """Targets (vaddrs) of the plain branches in the function at start (first 4 KiB): where it
    may tail-call. aarch64 B and B.cond, Thumb-2 B/B.W (and conditional), ARM B; ANY for a
    branch through a register (aarch64 br, Thumb bx other than lr)."""
    e = elf(path)
    key = (path, start, thumb)
    if key in _tails:
        return _tails[key]
    out = set()
    nxt = [a for a in e.starts + e.sym_addrs if a > start]
    end = min(nxt) if nxt else start + 4096
    end = min(end, start + 4096)
    code = e.code(start, end - start) or b""
    if e.is64 and e.data[18] == 183:
        for i in range(0, len(code) - 3, 4):
            w = struct.unpack_from("<I", code, i)[0]
            if w & 0xFC000000 == 0x14000000:
                imm = w & 0x3FFFFFF
                out.add(start + i + 4 * (imm - (1 << 26) if imm & (1 << 25) else imm))
            elif w & 0xFFFFFC1F == 0xD61F0000 and (w >> 5) & 31 != 30:
                out.add(ANY)  # br xN: a tail call through a pointer
            elif w & 0xFF000010 == 0x54000000:
                imm = (w >> 5) & 0x7FFFF
                out.add(start + i + 4 * (imm - (1 << 19) if imm & (1 << 18) else imm))
    elif e.is64:
        for i in range(len(code) - 4):  # jmp rel32 / rel8 (every byte: no decoder here)
            if code[i] == 0xE9:
                out.add(start + i + 5 + struct.unpack_from("<i", code, i + 1)[0])
            elif code[i] == 0xEB:
                out.add(start + i + 2 + struct.unpack_from("<b", code, i + 1)[0])
    elif thumb:
        i = 0
        while i + 2 <= len(code):
            h1 = struct.unpack_from("<H", code, i)[0]
            pc = start + i + 4
            if h1 & 0xF800 in (0xE800, 0xF000, 0xF800) and i + 4 <= len(code):
                h2 = struct.unpack_from("<H", code, i + 2)[0]
                if h1 & 0xF800 == 0xF000 and h2 & 0xD000 == 0x9000:  # B.W (T4)
                    s_, j1, j2 = (h1 >> 10) & 1, (h2 >> 13) & 1, (h2 >> 11) & 1
                    off = (s_ << 24) | ((1 - (j1 ^ s_)) << 23) | ((1 - (j2 ^ s_)) << 22) | \
                          ((h1 & 0x3FF) << 12) | ((h2 & 0x7FF) << 1)
                    out.add(pc + (off - (1 << 25) if s_ else off))
                elif h1 & 0xF800 == 0xF000 and h2 & 0xD000 == 0x8000:  # B<c>.W (T3)
                    s_, j1, j2 = (h1 >> 10) & 1, (h2 >> 13) & 1, (h2 >> 11) & 1
                    off = (s_ << 20) | (j2 << 19) | (j1 << 18) | ((h1 & 0x3F) << 12) | \
                          ((h2 & 0x7FF) << 1)
                    out.add(pc + (off - (1 << 21) if s_ else off))
                i += 4
                continue
            if h1 & 0xFF87 == 0x4700 and (h1 >> 3) & 15 != 14:
                out.add(ANY)  # bx rN: a tail call through a pointer
            elif h1 & 0xF800 == 0xE000:  # B (T2)
                off = (h1 & 0x7FF) << 1
                out.add(pc + (off - (1 << 12) if off & (1 << 11) else off))
            elif h1 & 0xF000 == 0xD000 and h1 & 0x0F00 < 0x0E00:  # B<c> (T1)
                off = (h1 & 0xFF) << 1
                out.add(pc + (off - (1 << 9) if off & (1 << 8) else off))
            i += 2
    else:
        for i in range(0, len(code) - 3, 4):
            w = struct.unpack_from("<I", code, i)[0]
            if w & 0x0F000000 == 0x0A000000:
                imm = w & 0xFFFFFF
                out.add(start + i + 8 + 4 * (imm - (1 << 24) if imm & (1 << 23) else imm))
    _tails[key] = out
    return out


_tails = {}
ANY = -1  # in tail_calls(): an indirect branch, which may reach any function


def edge_ok(caller, callee):
    """caller: (path, file offset of a return address); callee: (path, file offset of a pc in
    the called function). Whether the instruction before the return address calls it: a
    direct call to the callee's start (or to a PLT stub, for a callee in another file), or an
    indirect call. Tail calls fail this check; so would a wrong frame."""
    ce, ee = elf(caller[0]), elf(callee[0])
    if not ce or not ee:
        return False
    ra, pc = ce.vaddr(caller[1]), ee.vaddr(callee[1])
    if ra is None or pc is None:
        return False
    kind, target = call_target(caller[0], ra)
    if kind == "indirect":
        return True
    if kind != "direct":
        return False
    if any(lo <= target < hi for lo, hi in ce.plt):
        return True
    if caller[0] != callee[0]:
        return False
    want = ee.start(pc & ~1)
    if want is None:
        return False
    # the call's target, or a function it tail-calls (its frame is gone: the same physical
    # chain perf or a debugger shows)
    tails = tail_calls(caller[0], target & ~1, target & 1)
    # a tail call through a PLT stub (another module, or an IFUNC such as memcpy) may land
    # anywhere too
    return (target & ~1) == want or want in tails or ANY in tails or any(
        lo <= t < hi for t in tails for lo, hi in ce.plt)


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
