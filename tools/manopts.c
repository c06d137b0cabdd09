/*
 * Print bs_syncguard(8) from man/bs_syncguard.8.in, with the line
 * "@BSOPTS@" replaced by the bsopts table of core/opts.c, so that the
 * manual page and the module's own validation cannot disagree.  A build
 * helper, not installed.
 *
 *   manopts TEMPLATE > bs_syncguard.8
 */
#include <stdio.h>
#include <string.h>

#include "roff.h"
#include "syncguard_opts.h"

static void bsopts(void)
{
	const char *name, *values, *help;

	for (size_t i = 0; (name = syncguard_opts_doc(i, &values, &help)); i++) {
		printf(".TP\n.BI %s= value\n", name);
		roff_print(help);
		printf("\n.br\nValues: ");
		roff_print(values);
		putchar('\n');
	}
}

int main(int argc, char **argv)
{
	char line[4096];
	FILE *in;

	if (argc != 2 || !(in = fopen(argv[1], "r"))) {
		fprintf(stderr, "usage: manopts TEMPLATE\n");
		return 2;
	}
	while (fgets(line, sizeof(line), in)) {
		if (!strcmp(line, "@BSOPTS@\n"))
			bsopts();
		else
			fputs(line, stdout);
	}
	fclose(in);
	return 0;
}
