#!/bin/bash
# Comments, tests, scripts and docs say what the code does and why; the
# history of who found what, and when, lives in git and in
# docs/bench-history.md.  Fails on, in any tracked text file but that
# one:
#   - a citation of whoever found something (the word helper with a
#     number or naming its run or test, "the reviewer", "an outside
#     review");
#   - a commit hash (a hex word of 7 to 40 digits that is a commit of
#     this repository);
#   - a date (YYYY-MM-DD) or a word that needs one ("the day before",
#     "as before", "yesterday").
#
#   tests/history.sh [FILE...]     (default: every tracked file)
#
# It first shows that it catches each kind, in a file made for it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

words='[Hh]elper-[0-9]+|\b[Aa] helper'"'"'s (test|run|try|read|session)|\bthe reviewer\b|\b([Aa]n|[Tt]he) outside review(er)?\b|\bthe day before\b|\bas before\b|\byesterday\b|\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b'

# the lines of files $@ that cite history
cites() {
	grep -nHIE "$words" "$@" || true
	# hex words that name a commit of this repository
	grep -noHIwE '[0-9a-f]{7,40}' "$@" 2>/dev/null |
		while IFS=: read -r f n h; do
			[[ $h =~ [a-f] && $h =~ [0-9] ]] || continue
			git cat-file -e "$h^{commit}" 2>/dev/null &&
				echo "$f:$n: commit $h"
		done || true
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the whole hash: a short one can be all digits (about 1 in 27), which the
# check takes for a number and lets pass
head=$(git rev-parse HEAD 2>/dev/null || echo)
printf 'a\n/* found by helper-%d */\nb\n' 12 >"$tmp/a.c"
printf 'fixed in %s\n' "$head" >"$tmp/b.c"
printf 'measured 2026-01-02\n' >"$tmp/c.c"
for f in a b c; do
	[ "$f" = b ] && [ -z "$head" ] && continue	# no git history here
	if [ -z "$(cites "$tmp/$f.c")" ]; then
		echo "history: FAIL: $f.c's citation was not caught" >&2
		exit 1
	fi
done

if [ $# -eq 0 ]; then
	mapfile -t files < <(git ls-files | grep -vxE 'docs/bench-history\.md|tests/history\.sh' |
			     grep -vE '^tests/corpus/.*\.bin$|\.png$')
	set -- "${files[@]}"
fi
found=$(cites "$@")
if [ -n "$found" ]; then
	echo "history: FAIL: history belongs in git and docs/bench-history.md:" >&2
	echo "$found" >&2
	exit 1
fi
echo "history: ok ($# files)"
