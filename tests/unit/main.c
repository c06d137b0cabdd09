/*
 * The unit tests' runner: every suite of tests/unit, run under
 * AddressSanitizer and UndefinedBehaviorSanitizer by make check-unit.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

int main(void)
{
	SRunner *sr = srunner_create(opts_suite());
	char dir[PATH_MAX];
	int failed;

	/* latch records of the tests' LUNs (core/poison.c) go to the build
	 * directory, never to the host's /var/lib/syncguard */
	if (!realpath("build", dir)) {
		perror("build");
		return EXIT_FAILURE;
	}
	strncat(dir, "/unit-state", sizeof(dir) - strlen(dir) - 1);
	setenv("SYNCGUARD_STATE_DIR", dir, 1);
	if (system("rm -rf build/unit-state"))	/* an earlier run's */
		return EXIT_FAILURE;

	srunner_add_suite(sr, policy_suite());
	srunner_add_suite(sr, cdb_suite());
	srunner_add_suite(sr, exec_suite());
	srunner_add_suite(sr, flush_suite());
	srunner_add_suite(sr, plan_suite());
	srunner_add_suite(sr, errno_suite());
	srunner_add_suite(sr, stack_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
