/*
 * A test that cannot run here is left out out loud, never silently:
 * tests/names.sh accepts a listed test that did not run only when it was
 * recorded here.
 */
#ifndef SYNCGUARD_LEFTOUT_H
#define SYNCGUARD_LEFTOUT_H

#include <stdbool.h>

/*
 * Leave out @what (a test's name, or "FILE:TCASE" for a whole test case)
 * because of the printf-style reason: print it, and append "@what\treason"
 * to the file $SYNCGUARD_LEFT_OUT names (if set).  @dependency: the reason
 * is a missing package or tool (as opposed to something this machine or
 * kernel cannot do); then, with SYNCGUARD_REQUIRE_DEPS=1 (.ci/run sets
 * it), the run fails at once instead.
 */
void test_left_out(const char *what, bool dependency, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
