#!/bin/bash
# abi.sh: the module refuses to register in a tgtd it was not built for.
# A copy built with another tgtd build ID must not give tgtd a syncguard
# bstype (LUN creation fails) and must say why in tgtd's log; the real
# build, in the same kind of private tgtd, must work; and a DIR started
# again with another module file loads that one alone.  Exit 0 when so.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
tp=$top/scripts/tgtd-private
wrong=${1:?usage: abi.sh MODULE-BUILT-FOR-ANOTHER-TGTD}
work=$(mktemp -d "$top/build/abi.XXXXXX") || exit 1
trap '"$tp" stop "$work/a" >/dev/null 2>&1; "$tp" stop "$work/b" >/dev/null 2>&1; rm -rf "$work"' EXIT
say() { printf 'abi: %s\n' "$*" >&2; }
fail=0
truncate -s 16M "$work/lun.img"

mkdir -p "$work/a/m"
cp "$wrong" "$work/a/m/bs_syncguard.so"
"$tp" start "$work/a" "$work/a/m/bs_syncguard.so" >/dev/null || exit 1
"$tp" target "$work/a" 1 iqn.2026-11.org.syncguard:abi || exit 1
if "$tp" lun "$work/a" 1 1 "$work/lun.img" mode=write-back 2>/dev/null; then
	say "FAIL: a module built for another tgtd registered its bstype"; fail=1
fi
grep -q "built for tgtd build ID 0000.*not registering" "$work/a/tgtd.log" ||
	{ say "FAIL: tgtd's log does not say why:"; tail -3 "$work/a/tgtd.log" >&2; fail=1; }

"$tp" start "$work/b" "$top/bs_syncguard.so" >/dev/null || exit 1
"$tp" target "$work/b" 1 iqn.2026-11.org.syncguard:abi || exit 1
"$tp" stop "$work/a" >/dev/null 2>&1	# frees the file's lock
"$tp" lun "$work/b" 1 1 "$work/lun.img" mode=write-back ||
	{ say "FAIL: the module built for this tgtd did not register"; fail=1; }
# a DIR started again with another module file holds that one alone:
# the refused build must not load beside it
cp "$top/bs_syncguard.so" "$work/other.so"
"$tp" start "$work/a" "$work/other.so" >/dev/null || exit 1
[ "$(ls "$work/a/modules")" = other.so ] &&
	! grep -q "not registering" "$work/a/tgtd.log" ||
	{ say "FAIL: an earlier start's module loaded again: $(ls "$work/a/modules" | tr '\n' ' ')"; fail=1; }
[ "$fail" -eq 0 ] && say "ok: refused in another tgtd, loaded in this one, not left behind"
exit "$fail"
