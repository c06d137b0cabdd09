/*
 * A zvol's dataset by its udev name: /dev/zvol/POOL/VOLUME links to the
 * zdN device ZFS made for it (a number it hands out afresh at every
 * import), so the link is what names a zvol for good.
 *
 * Layer: a leaf of the core (it uses nothing of ours); core/stack.c
 * finds a LUN's zvol by it, core/storeid.c a zvol's identity.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* Is block device @rdev behind a link under @root ("/dev/zvol", where
 * udev names each zvol by its dataset), in @rel and below?  Its dataset
 * into @ds. */
static int scan(const char *root, const char *rel, dev_t rdev, char *ds,
		size_t len, int depth)
{
	char dir[2 * PATH_MAX], p[PATH_MAX];
	struct dirent *e;
	struct stat st;
	int found = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s%s%s", root, rel[0] ? "/" : "", rel);
	if (depth > 8 || !(d = opendir(dir)))
		return 0;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s%s%s", rel, rel[0] ? "/" : "",
			 e->d_name);
		snprintf(dir, sizeof(dir), "%s/%s", root, p);
		if (stat(dir, &st))
			continue;
		if (S_ISDIR(st.st_mode))
			found = scan(root, p, rdev, ds, len, depth + 1);
		else if (S_ISBLK(st.st_mode) && st.st_rdev == rdev)
			found = snprintf(ds, len, "%s", p) < (int)len;
	}
	closedir(d);
	return found;
}

int syncguard_zvol_name(const char *root, dev_t rdev, char *ds, size_t len)
{
	return scan(root, "", rdev, ds, len, 0);
}
