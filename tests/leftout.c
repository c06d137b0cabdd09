/*
 * test_left_out (tests/leftout.h): a test that cannot run here says so
 * on stderr and in $SYNCGUARD_LEFT_OUT, and fails for a missing
 * dependency under SYNCGUARD_REQUIRE_DEPS=1.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leftout.h"

void test_left_out(const char *what, bool dependency, const char *fmt, ...)
{
	const char *record = getenv("SYNCGUARD_LEFT_OUT");
	const char *require = getenv("SYNCGUARD_REQUIRE_DEPS");
	char why[512];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: left out: %s\n", what, why);
	if (dependency && require && !strcmp(require, "1")) {
		fprintf(stderr, "%s: a missing dependency with "
			"SYNCGUARD_REQUIRE_DEPS=1: failing\n", what);
		exit(EXIT_FAILURE);
	}
	if (record && (f = fopen(record, "a")) != NULL) {
		fprintf(f, "%s\t%s\n", what, why);
		fclose(f);
	}
}
