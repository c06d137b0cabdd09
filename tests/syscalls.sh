#!/bin/sh
# Every system call whose result decides durability goes through the
# table tests inject faults into (syncguard_sys, core/sys.c), so that
# the errno matrix (tests/unit/check_errno.c) reaches every one of them.
#
#   tests/syscalls.sh SYS_OBJECT OBJECT...
#
# Fails if an object other than SYS_OBJECT (the table's own) calls a
# write, flush, write-out or hole punch of libc directly (nm -u), or if
# the io_uring engine reads a completion's result anywhere but through
# syncguard_sys.ring_result.  It first shows that it catches such a call,
# in an object made for the purpose.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
calls='fdatasync|fsync|syncfs|sync|sync_file_range|fallocate|fallocate64|pwrite|pwrite64|pwritev|pwritev64|pwritev2|pwritev64v2'

# objects (besides the first) that call one of $calls directly
bypass() {
	latch=$1
	shift
	for o in "$@"; do
		[ "$o" = "$latch" ] && continue
		found=$(nm -u "$o" | awk '{ print $2 }' |
			grep -E "^($calls)(@.*)?$" | tr '\n' ' ') || true
		[ -n "$found" ] && echo "$o: $found"
	done
	return 0
}

# the check can fail: an object that calls fdatasync itself
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <unistd.h>\nint f(int fd) { return fdatasync(fd); }\n' \
	>"$tmp/bad.c"
${CC:-cc} -c "$tmp/bad.c" -o "$tmp/bad.o"
if [ -z "$(bypass "$1" "$tmp/bad.o")" ]; then
	echo "syscalls: FAIL: a direct fdatasync was not caught" >&2
	exit 1
fi

bad=$(bypass "$@")
if [ -n "$bad" ]; then
	echo "syscalls: FAIL: durability calls outside syncguard_sys:" >&2
	echo "$bad" >&2
	exit 1
fi
# io_uring completions: every cqe->res is read through ring_result()
uring="$top/glue/uring.c"
all=$(grep -c 'cqe->res' "$uring")
wrapped=$(grep -c 'ring_result(.*cqe->res' "$uring")
if [ "$all" -ne "$wrapped" ] || [ "$all" -eq 0 ]; then
	echo "syscalls: FAIL: $uring reads cqe->res $all times, $wrapped" \
	     "through ring_result" >&2
	exit 1
fi
echo "syscalls: ok ($# objects; durability calls only in $1)"
