/*
 * tmpdir_fixture.h - removing a test's scratch directory tree, shared by the
 * unit tests that run a real store or server under /tmp. Static functions:
 * each test executable includes its own copy.
 */
#ifndef GS_TEST_TMPDIR_FIXTURE_H
#define GS_TEST_TMPDIR_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static int fx_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

/* Depth-first so directories are empty when their turn comes; links are not followed. */
__attribute__((unused)) static void fx_rm_tree(const char *dir)
{
    nftw(dir, fx_rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

#endif
