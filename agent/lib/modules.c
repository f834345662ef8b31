// SPDX-License-Identifier: MIT
/*
 * agent/lib/modules.c — see modules.h. The table is rewritten in place: emptied (n = 0), walks in
 * flight waited for, written, published. A walk counts itself in flight before it loads n, so
 * a rewrite never overlaps a walk that reads the old entries.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "agent/lib/modules.h"

#ifdef DLFO_STRUCT_HAS_EH_DBASE /* glibc 2.35+: resolved at run time, so older glibc loads us */
typedef int (*find_object_fn)(void *pc, struct dl_find_object *out);
static find_object_fn find_object;
#endif

static struct module modules[MODULES_MAX];
static unsigned int n_modules;	/* published with release after the table is written */
static unsigned int in_flight;	/* walks running now: the table is rewritten only at 0 */
static unsigned int generation; /* bumped per table: per-thread caches of older ones are void */
static unsigned int stale_seen; /* a walk saw the table disagree with the loader: rebuild */
static bool trust_table;
static struct modules_stats mstats;

/* Serializes builders (the drain thread, interposed dlopen/dlclose); never taken in a handler */
static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;
static struct module staging[MODULES_MAX];
static unsigned long long seen_adds = ~0ull, seen_subs = ~0ull;

struct build {
	unsigned int n;
	unsigned long long adds, subs;
};

static bool has_counters(size_t size)
{
	return size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(unsigned long long);
}

/* The load segment holding addr: [*lo, *hi); false when none does. */
static bool segment_of(const struct dl_phdr_info *info, uintptr_t addr, uintptr_t *lo,
		       uintptr_t *hi)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && addr >= a && addr - a < ph->p_memsz) {
			*lo = a;
			*hi = a + ph->p_memsz;
			return true;
		}
	}
	return false;
}

static int add_module(struct dl_phdr_info *info, size_t size, void *data)
{
	struct build *b = data;
	struct module m = {.text_lo = UINTPTR_MAX, .map_lo = UINTPTR_MAX};
	uintptr_t lo, hi, page = (uintptr_t)sysconf(_SC_PAGESIZE);

	if (has_counters(size)) {
		b->adds = info->dlpi_adds;
		b->subs = info->dlpi_subs;
	}
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, e = a + ph->p_memsz;

		if (ph->p_type == PT_LOAD) {
			m.map_lo = a < m.map_lo ? a : m.map_lo;
			if (ph->p_flags & PF_X) {
				m.text_lo = a < m.text_lo ? a : m.text_lo;
				m.text_hi = e > m.text_hi ? e : m.text_hi;
			}
		} else if (ph->p_type == PT_GNU_EH_FRAME && segment_of(info, a, &lo, &hi)) {
			m.cfi = (struct cfi_table){lo, hi, (const uint8_t *)a};
		} else if (ph->p_type == PT_ARM_EXIDX && sizeof(uintptr_t) == 4 &&
			   segment_of(info, a, &lo, &hi)) {
			m.ehabi = (struct ehabi_table){(const uint8_t *)lo, (uint32_t)lo,
						       (uint32_t)hi, (uint32_t)a,
						       (uint32_t)(ph->p_memsz / 8)};
		}
	}
	if (m.text_lo == UINTPTR_MAX)
		return 0;
	m.map_lo &= ~(page - 1);
	if (b->n == MODULES_MAX) {
		mstats.overflow++;
		return 0;
	}
	staging[b->n++] = m;
	return 0;
}

void modules__suspend(void)
{
	__atomic_store_n(&n_modules, 0, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&in_flight, __ATOMIC_SEQ_CST))
		sched_yield();
}

static int rebuild_locked(void)
{
	struct build b = {0, ~0ull, ~0ull};

#ifdef DLFO_STRUCT_HAS_EH_DBASE
	if (!find_object)
		*(void **)&find_object = dlsym(RTLD_DEFAULT, "_dl_find_object");
#endif
	__atomic_store_n(&stale_seen, 0, __ATOMIC_SEQ_CST);
	dl_iterate_phdr(add_module, &b);
	modules__suspend();
	memcpy(modules, staging, b.n * sizeof(modules[0]));
	seen_adds = b.adds;
	seen_subs = b.subs;
	mstats.rebuilds++;
	__atomic_fetch_add(&generation, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&n_modules, b.n, __ATOMIC_SEQ_CST);
	return (int)b.n;
}

int modules__rebuild(void)
{
	int n;

	pthread_mutex_lock(&build_lock);
	n = rebuild_locked();
	pthread_mutex_unlock(&build_lock);
	return n;
}

static int read_counters(struct dl_phdr_info *info, size_t size, void *data)
{
	struct build *b = data;

	if (has_counters(size)) {
		b->adds = info->dlpi_adds;
		b->subs = info->dlpi_subs;
	}
	return 1; /* the first module is enough: the counters are global */
}

int modules__refresh(void)
{
	struct build b = {0, ~0ull, ~0ull};
	int rebuilt = 0;

	pthread_mutex_lock(&build_lock);
	dl_iterate_phdr(read_counters, &b);
	if (b.adds != seen_adds || b.subs != seen_subs || b.adds == ~0ull ||
	    __atomic_load_n(&stale_seen, __ATOMIC_SEQ_CST)) {
		rebuild_locked();
		rebuilt = 1;
	}
	pthread_mutex_unlock(&build_lock);
	return rebuilt;
}

void modules__trust_table(bool on)
{
	trust_table = on;
}

void modules__stats(struct modules_stats *st)
{
	*st = mstats;
	st->n = __atomic_load_n(&n_modules, __ATOMIC_RELAXED);
	st->max = MODULES_MAX;
}

/* ---- handler side ------------------------------------------------------------------------ */

void modules__enter(void)
{
	/* counted before the table is read (see modules__suspend) */
	__atomic_fetch_add(&in_flight, 1, __ATOMIC_SEQ_CST);
}

void modules__leave(void)
{
	__atomic_fetch_sub(&in_flight, 1, __ATOMIC_SEQ_CST);
}

unsigned int modules__generation(void)
{
	return __atomic_load_n(&generation, __ATOMIC_RELAXED);
}

const struct module *modules__find(uintptr_t pc)
{
	unsigned int n = __atomic_load_n(&n_modules, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < n; i++)
		if (pc >= modules[i].text_lo && pc < modules[i].text_hi)
			return &modules[i];
	return NULL;
}

/*
 * The table and the loader disagree: ask the next refresh for a rebuild, and void the
 * per-thread caches once (addresses of the module that went may mean other code now).
 */
static void saw_stale(void)
{
	__atomic_fetch_add(&mstats.stale, 1, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&stale_seen, 1, __ATOMIC_SEQ_CST) == 0)
		__atomic_fetch_add(&generation, 1, __ATOMIC_SEQ_CST);
}

bool modules__is_code(uintptr_t pc)
{
	if (modules__find(pc))
		return true;
#ifdef DLFO_STRUCT_HAS_EH_DBASE
	struct dl_find_object fo;

	/* a module loaded since the last build (by glibc itself, say): code all the same */
	if (find_object && find_object((void *)pc, &fo) == 0) {
		saw_stale();
		return true;
	}
#endif
	return false;
}

/* The unwind table the loader names for a module: .eh_frame_hdr, or .ARM.exidx on ARM. */
static const void *table_of(const struct module *m)
{
	return m->ehabi.n ? (const void *)(uintptr_t)m->ehabi.exidx : (const void *)m->cfi.eh_hdr;
}

bool modules__readable(const struct module *m, uintptr_t pc)
{
#ifdef DLFO_STRUCT_HAS_EH_DBASE
	struct dl_find_object fo;

	if (find_object) {
		/* the loader's own answer, now: a table entry alone may name an unmapped module,
		 * or one that another took the place of */
		if (find_object((void *)pc, &fo) != 0 ||
		    (uintptr_t)fo.dlfo_map_start != m->map_lo || fo.dlfo_eh_frame != table_of(m)) {
			saw_stale();
			return false;
		}
		return true;
	}
#endif
	if (!trust_table) {
		__atomic_fetch_add(&mstats.unverified, 1, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}
