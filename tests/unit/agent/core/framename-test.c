// SPDX-License-Identifier: MIT
/*
 * Unit tests of agent/core/framename.c's cache: a frame word holds a function and a position
 * (Python's code unit, Lua's pc); names are cached per function, lines per word. The reader
 * here stands for a process: it answers while "alive" and fails (-EFAULT, as process_vm_readv
 * does for an exited pid) after, or names another function at the same address (the object
 * freed and the memory reused). What the cache must give: a word evicted from the lines, asked
 * for after the exit, still named (its first line, counted once); a function at a reused
 * address read as the new one, its old words too; a word the reader rejected not read again; a
 * cache without lines as before (name and line per word); forget() drops a pid's entries.
 * And the rounds: what a drain pass pins stays until its round is released, whatever comes
 * after it (the writer's reads, other processes), until a set is all pinned (counted: dropped);
 * a text is shared by the processes that run the same function.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "agent/core/framename.h"

#define POS_SHIFT 45
#define FN(w) ((w) & ((1ull << POS_SHIFT) - 1))
#define WORD(fn, pos) ((uint64_t)(pos) << POS_SHIFT | (fn))
#define BAD_FN 0x666

static int alive = 1, reused, reads;

/* Function fn is "f<fn>" first on line 10 * fn; position p is on its line 10 * fn + p. */
static int fake_read(uint32_t pid, uint64_t key, struct framename *out)
{
	uint64_t fn = FN(key);

	(void)pid;
	reads++;
	if (!alive)
		return -EFAULT;
	if (fn == BAD_FN)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s%llu", reused ? "other" : "f",
		 (unsigned long long)fn);
	out->start_line = (int64_t)(10 * fn);
	out->line = out->start_line + (int64_t)(key >> POS_SHIFT);
	return 0;
}

static struct framename_text texts[16];
static struct framename_entry fns[16];
static struct framename_entry lines[16]; /* two sets: 40 words cannot all stay */
static struct framename_cache cache = FRAMENAME_CACHE_LINES(texts, fns, lines);

static int setup(void **state)
{
	(void)state;
	memset(texts, 0, sizeof(texts));
	memset(fns, 0, sizeof(fns));
	memset(lines, 0, sizeof(lines));
	cache.cached = cache.evicted = cache.dropped = cache.lines_lost = 0;
	cache.gen = 0;
	framename__release(framename__round_end()); /* nothing pinned: a new round */
	alive = 1;
	reused = 0;
	reads = 0;
	return 0;
}

static int resolve(uint64_t w, struct framename *n)
{
	return framename__resolve(&cache, 7, w, FN(w), fake_read, n);
}

static void lines_evicted_keep_their_name(void **state)
{
	struct framename n;
	int exact = 0;

	(void)state;
	for (unsigned int p = 1; p <= 40; p++) /* one function's 40 positions: a released round */
		assert_int_equal(resolve(WORD(3, p), &n), 0);
	assert_int_equal(reads, 40);
	alive = 0; /* the process exits before the profile is written */
	for (unsigned int p = 40; p >= 1; p--) { /* newest first: each set's 8 newest still held */
		assert_int_equal(resolve(WORD(3, p), &n), 0);
		assert_string_equal(n.name, "f3");
		assert_int_equal(n.start_line, 30);
		if (n.line) { /* still cached: its own line */
			assert_int_equal(n.line, 30 + p);
			exact++;
		}
	}
	assert_int_equal(exact, 16);
	assert_int_equal(cache.lines_lost, 24);
	assert_int_equal(cache.evicted, 0); /* one function entry served them all */
	assert_int_equal(cache.dropped, 0); /* nothing was pinned */
}

static void rejected_words_are_not_read_again(void **state)
{
	struct framename n;

	(void)state;
	assert_int_equal(resolve(WORD(BAD_FN, 1), &n), -EINVAL);
	assert_int_equal(resolve(WORD(BAD_FN, 1), &n), -EINVAL);
	assert_int_equal(reads, 1);
	alive = 0; /* a function never named stays unnamed, its other positions too */
	assert_true(resolve(WORD(BAD_FN, 2), &n) < 0);
}

static void a_named_function_is_not_renamed_by_a_failure(void **state)
{
	struct framename n;

	(void)state;
	assert_int_equal(resolve(WORD(5, 1), &n), 0);
	alive = 0;
	assert_int_equal(resolve(WORD(5, 9), &n), 0); /* never seen, the function known */
	assert_string_equal(n.name, "f5");
	assert_int_equal(n.line, 0);
	assert_int_equal(resolve(WORD(5, 1), &n), 0);
	assert_int_equal(n.line, 51);
	assert_int_equal(resolve(WORD(6, 1), &n), -EFAULT); /* never named at all */
}

/*
 * A function's address reused by another (the code object freed: exec'd code, an import's
 * module body): the new words are read as the new function; an old word keeps the function it
 * was read as (its samples ran it), after the exit too.
 */
static void a_word_keeps_the_function_it_was_read_as(void **state)
{
	struct framename n;

	(void)state;
	framename__pin(&cache, 7, WORD(5, 1), 5, fake_read);
	reused = 1;
	framename__pin(&cache, 7, WORD(5, 2), 5, fake_read);
	assert_int_equal(resolve(WORD(5, 2), &n), 0);
	assert_string_equal(n.name, "other5");
	assert_int_equal(n.line, 52);
	alive = 0;
	assert_int_equal(resolve(WORD(5, 1), &n), 0);
	assert_string_equal(n.name, "f5");
	assert_int_equal(n.line, 51);
	assert_int_equal(reads, 2);
	assert_int_equal(cache.lines_lost, 0);
	/* a word never read, after the exit: the function last read at the address */
	assert_int_equal(resolve(WORD(5, 3), &n), 0);
	assert_string_equal(n.name, "other5");
	assert_int_equal(cache.lines_lost, 1);
}

static void a_lost_line_is_counted_once(void **state)
{
	struct framename n;

	(void)state;
	assert_int_equal(resolve(WORD(5, 1), &n), 0);
	alive = 0;
	for (int i = 0; i < 5; i++) {
		assert_int_equal(resolve(WORD(5, 3), &n), 0);
		assert_string_equal(n.name, "f5");
		assert_int_equal(n.line, 0);
	}
	assert_int_equal(cache.lines_lost, 1);
	assert_int_equal(reads, 2);
}

/* A line the reader gives that is no line number (a torn co_firstlineno) is shown as unknown,
 * and the word stays named. */
static int negative_line(uint32_t pid, uint64_t key, struct framename *out)
{
	int err = fake_read(pid, key, out);

	out->line = -5;
	return err;
}

static void a_bad_line_is_unknown_not_an_error(void **state)
{
	struct framename n;

	(void)state;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(framename__resolve(&cache, 7, WORD(2, 1), 2, negative_line, &n), 0);
		assert_string_equal(n.name, "f2");
		assert_int_equal(n.line, 0);
	}
}

static void without_lines_a_word_is_its_own_name(void **state)
{
	static struct framename_text t16[16];
	static struct framename_entry f8[8];
	static struct framename_cache c = FRAMENAME_CACHE(t16, f8);
	struct framename n;

	(void)state;
	for (unsigned int f = 1; f <= 9; f++) /* one set of 8: the first is pushed out */
		assert_int_equal(framename__resolve(&c, 7, WORD(f, 2), WORD(f, 2), fake_read, &n), 0);
	assert_int_equal(n.line, 92);
	assert_int_equal(c.evicted, 1);
	assert_int_equal(framename__resolve(&c, 7, WORD(9, 2), WORD(9, 2), fake_read, &n), 0);
	assert_int_equal(c.cached, 1);
	alive = 0;
	assert_int_equal(framename__resolve(&c, 7, WORD(1, 2), WORD(1, 2), fake_read, &n), -EFAULT);
}

static void forget_drops_the_pid(void **state)
{
	static struct framename_text t8[8]; /* one set each: every key collides */
	static struct framename_entry f8[8], l8[8];
	static struct framename_cache c = FRAMENAME_CACHE_LINES(t8, f8, l8);
	struct framename n;

	(void)state;
	assert_int_equal(framename__resolve(&c, 7, WORD(4, 1), 4, fake_read, &n), 0);
	assert_int_equal(framename__resolve(&c, 7, WORD(BAD_FN, 1), BAD_FN, fake_read, &n), -EINVAL);
	assert_int_equal(framename__resolve(&c, 8, WORD(4, 1), 4, fake_read, &n), 0);
	assert_int_equal(reads, 3); /* another pid's word is another frame */
	framename__forget(&c, 7);
	assert_int_equal(framename__resolve(&c, 7, WORD(4, 1), 4, fake_read, &n), 0);
	assert_int_equal(framename__resolve(&c, 7, WORD(BAD_FN, 1), BAD_FN, fake_read, &n), -EINVAL);
	assert_int_equal(reads, 5); /* both read again: the error was forgotten too */
	assert_int_equal(framename__resolve(&c, 8, WORD(4, 1), 4, fake_read, &n), 0);
	assert_int_equal(reads, 5); /* pid 8's stayed */
}

/*
 * One process's names pinned in a round outlive what comes after in it: the writer's reads of
 * another process's 20 functions, then the process's exit.
 */
static void a_round_keeps_its_names_until_released(void **state)
{
	static struct framename_text t64[64];
	static struct framename_entry f8[8], l8[8]; /* one set each */
	static struct framename_cache c = FRAMENAME_CACHE_LINES(t64, f8, l8);
	struct framename n;

	(void)state;
	for (unsigned int f = 1; f <= 4; f++)
		framename__pin(&c, 7, WORD(f, 1), f, fake_read);
	for (unsigned int f = 20; f < 40; f++)
		assert_int_equal(framename__resolve(&c, 9, WORD(f, 1), f, fake_read, &n), 0);
	assert_true(c.evicted >= 12); /* the writer's went round the 4 ways left */
	alive = 0;
	reads = 0;
	for (unsigned int f = 1; f <= 4; f++) {
		assert_int_equal(framename__resolve(&c, 7, WORD(f, 1), f, fake_read, &n), 0);
		assert_int_equal(n.line, 10 * f + 1);
	}
	assert_int_equal(reads, 0);
	assert_int_equal(c.dropped, 0);
}

/* Released, a round's names are the ones to go: the next round's fill the set, none dropped. */
static void a_released_round_makes_room(void **state)
{
	static struct framename_text t64[64];
	static struct framename_entry f8[8];
	static struct framename_cache c = FRAMENAME_CACHE(t64, f8);
	uint32_t r = framename__round();

	(void)state;
	for (unsigned int f = 1; f <= 8; f++)
		framename__pin(&c, 7, f, f, fake_read);
	assert_int_equal(framename__round_end(), r);
	framename__release(r);
	for (unsigned int f = 11; f <= 18; f++)
		framename__pin(&c, 8, f, f, fake_read);
	assert_int_equal(c.dropped, 0);
	assert_int_equal(c.evicted, 8);
	framename__release(r - 1); /* a release never goes back */
	framename__pin(&c, 8, 19, 19, fake_read);
	assert_int_equal(c.dropped, 1); /* the set is the current round's */
}

/* A set all pinned pushes out the entry used longest ago, counted: that frame is unnamed. */
static void a_full_set_of_pinned_names_drops_the_oldest(void **state)
{
	static struct framename_text t64[64];
	static struct framename_entry f8[8];
	static struct framename_cache c = FRAMENAME_CACHE(t64, f8);
	struct framename n;
	int unnamed = 0;

	(void)state;
	for (unsigned int f = 1; f <= 9; f++) /* 9 functions, one set of 8, one round */
		framename__pin(&c, 7, f, f, fake_read);
	assert_int_equal(c.dropped, 1);
	assert_int_equal(c.evicted, 0);
	alive = 0;
	for (unsigned int f = 1; f <= 9; f++)
		unnamed += framename__resolve(&c, 7, f, f, fake_read, &n) == -EFAULT;
	assert_int_equal(unnamed, 1);
	assert_int_equal(framename__resolve(&c, 7, 1, 1, fake_read, &n), -EFAULT); /* the first */
}

/* A key whose first set is all pinned goes to its second: two sets of 8 hold 16 pinned. */
static void a_full_first_set_spills_to_the_second(void **state)
{
	static struct framename_text t64[64];
	static struct framename_entry f16[16];
	static struct framename_cache c = FRAMENAME_CACHE(t64, f16);
	struct framename n;

	(void)state;
	for (unsigned int f = 1; f <= 16; f++)
		framename__pin(&c, 7, f, f, fake_read);
	assert_int_equal(c.dropped, 0);
	alive = 0;
	for (unsigned int f = 1; f <= 16; f++)
		assert_int_equal(framename__resolve(&c, 7, f, f, fake_read, &n), 0);
	alive = 1;
	framename__pin(&c, 7, 17, 17, fake_read);
	assert_int_equal(c.dropped, 1);
}

/*
 * A name used again in a later round is pinned to it: that round's own names, more than the set
 * holds, push out the ones used longest ago, not it.
 */
static void a_name_used_again_is_pinned_again(void **state)
{
	static struct framename_text t8[8];
	static struct framename_entry f8[8], l8[8]; /* one set each */
	static struct framename_cache c = FRAMENAME_CACHE_LINES(t8, f8, l8);
	struct framename n;
	uint32_t r = framename__round();

	(void)state;
	framename__pin(&c, 7, WORD(1, 1), 1, fake_read);
	framename__round_end();
	framename__release(r);
	for (unsigned int f = 20; f < 27; f++) /* the next round: 7 of another process's */
		framename__pin(&c, 8, WORD(f, 1), f, fake_read);
	framename__pin(&c, 7, WORD(1, 1), 1, fake_read); /* a sample of it in this round too */
	framename__pin(&c, 8, WORD(27, 1), 27, fake_read);
	assert_int_equal(c.dropped, 2); /* a text and a line of pid 8's first function */
	alive = 0;
	assert_int_equal(framename__resolve(&c, 7, WORD(1, 1), 1, fake_read, &n), 0);
	assert_string_equal(n.name, "f1");
	assert_int_equal(n.line, 11);
	assert_int_equal(framename__resolve(&c, 8, WORD(20, 1), 20, fake_read, &n), -EFAULT);
}

/* The writer's read of a word not held, in a set all pinned, is answered, not cached. */
static void the_writer_pushes_out_no_pinned_name(void **state)
{
	static struct framename_text t8[8]; /* one set each: the texts' full too */
	static struct framename_entry f8[8];
	static struct framename_cache c = FRAMENAME_CACHE(t8, f8);
	struct framename n;

	(void)state;
	for (unsigned int f = 1; f <= 8; f++)
		framename__pin(&c, 7, f, f, fake_read);
	reads = 0;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(framename__resolve(&c, 7, 9, 9, fake_read, &n), 0);
		assert_string_equal(n.name, "f9");
	}
	assert_int_equal(reads, 3);
	alive = 0;
	for (unsigned int f = 1; f <= 8; f++)
		assert_int_equal(framename__resolve(&c, 7, f, f, fake_read, &n), 0);
	assert_int_equal(c.dropped, 0);
}

/* Processes that run the same function share its text: 20 of them fit in an 8-text cache. */
static void processes_share_a_functions_text(void **state)
{
	static struct framename_text t8[8];
	static struct framename_entry f32[32], l32[32];
	static struct framename_cache c = FRAMENAME_CACHE_LINES(t8, f32, l32);
	struct framename n;
	unsigned int held = 0;

	(void)state;
	for (uint32_t pid = 100; pid < 120; pid++)
		framename__pin(&c, pid, WORD(3, 1), 3, fake_read);
	for (unsigned int i = 0; i < 8; i++)
		held += t8[i].hash != 0;
	assert_int_equal(held, 1);
	assert_int_equal(reads, 20); /* each process's memory read once */
	alive = 0;
	for (uint32_t pid = 100; pid < 120; pid++) { /* 20 lines, 20 functions in 32 of each */
		assert_int_equal(framename__resolve(&c, pid, WORD(3, 1), 3, fake_read, &n), 0);
		assert_string_equal(n.name, "f3");
		assert_int_equal(n.line, 31);
	}
	assert_int_equal(c.dropped, 0);
}

/* A function whose text was pushed out is read again, and named anew while it can be. */
static void a_pushed_out_text_is_read_again(void **state)
{
	static struct framename_text t8[8];
	static struct framename_entry f16[16];
	static struct framename_cache c = FRAMENAME_CACHE(t8, f16);
	struct framename n;

	(void)state;
	for (unsigned int f = 1; f <= 9; f++) /* the writer's: 9 texts in a set of 8 */
		assert_int_equal(framename__resolve(&c, 7, f, f, fake_read, &n), 0);
	reads = 0;
	assert_int_equal(framename__resolve(&c, 7, 1, 1, fake_read, &n), 0);
	assert_int_equal(reads, 1); /* f1's text went for f9's */
	assert_string_equal(n.name, "f1");
	for (unsigned int f = 1; f <= 9; f++) {
		assert_int_equal(framename__resolve(&c, 7, f, f, fake_read, &n), 0);
		assert_int_equal(n.start_line, 10 * f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(lines_evicted_keep_their_name, setup),
	    cmocka_unit_test_setup(rejected_words_are_not_read_again, setup),
	    cmocka_unit_test_setup(a_named_function_is_not_renamed_by_a_failure, setup),
	    cmocka_unit_test_setup(a_word_keeps_the_function_it_was_read_as, setup),
	    cmocka_unit_test_setup(a_lost_line_is_counted_once, setup),
	    cmocka_unit_test_setup(a_bad_line_is_unknown_not_an_error, setup),
	    cmocka_unit_test_setup(without_lines_a_word_is_its_own_name, setup),
	    cmocka_unit_test_setup(forget_drops_the_pid, setup),
	    cmocka_unit_test_setup(a_round_keeps_its_names_until_released, setup),
	    cmocka_unit_test_setup(a_released_round_makes_room, setup),
	    cmocka_unit_test_setup(a_full_set_of_pinned_names_drops_the_oldest, setup),
	    cmocka_unit_test_setup(a_full_first_set_spills_to_the_second, setup),
	    cmocka_unit_test_setup(a_name_used_again_is_pinned_again, setup),
	    cmocka_unit_test_setup(the_writer_pushes_out_no_pinned_name, setup),
	    cmocka_unit_test_setup(processes_share_a_functions_text, setup),
	    cmocka_unit_test_setup(a_pushed_out_text_is_read_again, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
