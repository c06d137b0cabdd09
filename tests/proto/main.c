#include <stdlib.h>

#include "proto.h"

int main(void)
{
	SRunner *sr;
	int failed;

	(void)proto_iqn();	/* this process's pid, before tests fork */
	sr = srunner_create(modes_suite());

	srunner_add_suite(sr, bsopts_suite());
	srunner_add_suite(sr, blockdev_suite());
	srunner_add_suite(sr, faults_suite());
	srunner_add_suite(sr, commands_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	proto_tgtd_stop();	/* in case a teardown was skipped */
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
