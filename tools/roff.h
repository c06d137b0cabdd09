/* Printing text into a manual page (troff), for the tools that print
 * their own page from their tables. */
#ifndef SYNCGUARD_ROFF_H
#define SYNCGUARD_ROFF_H

#include <stdio.h>

/* Print @s as troff text: backslashes and dashes escaped, and a dot or
 * quote that starts it (a request otherwise) made literal. */
static inline void roff_print(const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", stdout);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", stdout);
		else if (*s == '-')
			fputs("\\-", stdout);
		else
			putchar(*s);
	}
}

#endif
