#!/bin/sh
# The tests that ran are the tests we list: no test is left out in
# silence, and none runs that the list does not know.
#
#   tests/names.sh [--update] TAP LEFT_OUT [TAP LEFT_OUT]...
#
# TAP is a test binary's TAP log (check's CK_TAP_LOG_FILE_NAME), LEFT_OUT
# the tests it left out with their reason (tests/leftout.h; may be
# missing: none).  Every test of tests/names.txt ("FILE:TCASE:TEST", one
# per line) must have run, or have been left out under its name or its
# "FILE:TCASE"; a test that ran must be listed.  --update rewrites the
# list from what ran (and keeps what was left out): for a test added,
# renamed or removed, in the same commit.  Before it checks, it shows
# that it catches a listed test that neither ran nor was left out.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
list="$top/tests/names.txt"
update=0
if [ "${1:-}" = --update ]; then
	update=1
	shift
fi

# "FILE:TCASE:TEST" of each test in TAP files $@ (one line per test, also
# for a loop test's iterations), with "ok" or "not ok" in front
results() {
	sed -n 's/^\(not ok\|ok\) [0-9]* - \([^:]*:[^:]*:[^:]*\):.*/\1 \2/p' "$@" |
		sort -u
}

# names of $1 (a list) that neither ran (TAP files) nor were left out
# (left-out files), given as "TAP LEFT_OUT" pairs after it
unaccounted() {
	names=$1
	shift
	taps= outs=
	while [ $# -ge 2 ]; do
		taps="$taps $1"
		[ -f "$2" ] && outs="$outs $2"
		shift 2
	done
	ran=$(results $taps | sed 's/^\(not \)\{0,1\}ok //')
	gone=$(cat /dev/null $outs | cut -f1)
	grep -v '^#' "$names" | grep -v '^$' | while read -r t; do
		printf '%s\n' "$ran" | grep -qxF "$t" && continue
		name=${t##*:}
		tcase=${t%:*}
		printf '%s\n' "$gone" | grep -qxF -e "$name" -e "$tcase" &&
			continue
		echo "$t"
	done
}

# the check can fail: a list naming a test that neither ran nor was left out
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'x.c:tc:test_ran\nx.c:tc:test_silent\n' >"$tmp/names"
printf 'ok 1 - x.c:tc:test_ran: Passed\n' >"$tmp/tap"
if [ "$(unaccounted "$tmp/names" "$tmp/tap" "$tmp/none")" != \
     x.c:tc:test_silent ]; then
	echo "names: FAIL: a test missing in silence was not caught" >&2
	exit 1
fi

taps=
pairs="$*"
while [ $# -ge 2 ]; do
	[ -f "$1" ] || { echo "names: FAIL: no TAP log $1" >&2; exit 1; }
	taps="$taps $1"
	shift 2
done
ran=$(results $taps | sed 's/^\(not \)\{0,1\}ok //')

if [ "$update" = 1 ]; then
	# what ran, and what the list has that was left out here
	# shellcheck disable=SC2086
	unaccounted "$list" $pairs >"$tmp/silent"
	{
		echo "# Every test make check runs, FILE:TCASE:TEST (tests/names.sh)."
		{
			printf '%s\n' "$ran"
			grep -v '^#' "$list" | grep -v '^$' |
				grep -vxF -f "$tmp/silent" || true
		} | sort -u
	} >"$list.new"
	mv "$list.new" "$list"
	echo "names: wrote $list ($(grep -vc '^#' "$list") tests)"
	exit 0
fi

status=0
new=$(printf '%s\n' "$ran" | grep -vxF -f "$list" || true)
if [ -n "$new" ]; then
	echo "names: FAIL: tests that ran but are not in tests/names.txt" \
	     "(tests/names.sh --update):" >&2
	printf '  %s\n' $new >&2
	status=1
fi
# shellcheck disable=SC2086
silent=$(unaccounted "$list" $pairs)
if [ -n "$silent" ]; then
	echo "names: FAIL: tests of tests/names.txt that neither ran nor" \
	     "were left out with a reason:" >&2
	printf '  %s\n' $silent >&2
	status=1
fi
if [ "$status" = 0 ]; then
	left=$(cat /dev/null $(printf '%s\n' $pairs | sed -n '2~2p' |
		while read -r f; do [ -f "$f" ] && echo "$f"; done) | wc -l)
	echo "names: ok ($(printf '%s\n' "$ran" | grep -c .) tests ran," \
	     "$left left out with a reason)"
fi
exit "$status"
