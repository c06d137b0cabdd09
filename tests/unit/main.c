#include <stdlib.h>

#include "unit.h"

int main(void)
{
	SRunner *sr = srunner_create(opts_suite());
	int failed;

	srunner_add_suite(sr, policy_suite());
	srunner_add_suite(sr, cdb_suite());
	srunner_add_suite(sr, exec_suite());
	srunner_add_suite(sr, flush_suite());
	srunner_add_suite(sr, plan_suite());
	srunner_add_suite(sr, errno_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
