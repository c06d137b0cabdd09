#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

/*
 * A loop device that is none of the tests' own, attached before and
 * checked after: the suites clean up only their own (a teardown that
 * filters on a wrong path detaches every loop device of the host).
 * @dev gets the device, "" if none could be set up (no loop support:
 * the check is then skipped).
 */
static void canary_attach(char *img, char *dev, size_t len)
{
	const char *top = getenv("SYNCGUARD_TOP");
	char cmd[PATH_MAX + 64];
	FILE *p;

	dev[0] = '\0';
	snprintf(img, PATH_MAX, "%s/build/canary-%d.img", top ? top : ".",
		 (int)getpid());
	if (proto_sh("truncate -s 1M '%s'", img))
		return;
	snprintf(cmd, sizeof(cmd), "losetup --find --show '%s' 2>/dev/null",
		 img);
	p = popen(cmd, "r");
	if (!p || !fgets(dev, (int)len, p))
		dev[0] = '\0';
	if (p)
		pclose(p);
	dev[strcspn(dev, "\n")] = '\0';
}

/* 0 if the canary is still attached to its file; detaches it either way */
static int canary_check(const char *img, const char *dev)
{
	int gone;

	if (!dev[0])
		return 0;
	gone = proto_sh("losetup -nO BACK-FILE '%s' 2>/dev/null | grep -qF "
			"'%s'", dev, img);
	proto_sh("losetup -d '%s' 2>/dev/null; rm -f '%s'", dev, img);
	if (gone)
		fprintf(stderr, "proto: FAIL: the tests detached %s, a loop "
			"device that was not theirs\n", dev);
	return gone;
}

int main(void)
{
	char img[PATH_MAX], dev[64];
	SRunner *sr;
	int failed;

	(void)proto_iqn();	/* this process's pid, before tests fork */
	canary_attach(img, dev, sizeof(dev));
	sr = srunner_create(modes_suite());

	srunner_add_suite(sr, bsopts_suite());
	srunner_add_suite(sr, blockdev_suite());
	srunner_add_suite(sr, faults_suite());
	srunner_add_suite(sr, commands_suite());
	srunner_add_suite(sr, nbdkit_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	proto_tgtd_stop();	/* in case a teardown was skipped */
	failed += canary_check(img, dev);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
