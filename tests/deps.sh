#!/bin/sh
# The module's files depend on each other one way: no file calls into a
# file that calls back into it, directly or around a circle, and the
# core (core/) never calls the glue (glue/, compiled against tgt); and
# no file uses tgt's worker threads (bs_thread_*).
#
#   tests/deps.sh OBJECT...
#
# An object depends on another when it uses (nm -u) a symbol the other
# defines.  The edges go to tsort(1), which fails on a circle.  The check
# first shows that it catches one, in two objects made for the purpose.
set -eu

# "user definer" lines: one per object that uses a symbol another defines
edges() {
	for o in "$@"; do
		nm --defined-only -g "$o" |
			awk -v f="$(basename "$o" .o)" 'NF == 3 { print "D", $3, f }'
		nm -u "$o" | awk -v f="$(basename "$o" .o)" '{ print "U", $2, f }'
	done | awk '
		$1 == "D" { def[$2] = $3; next }
		{ use[$3 " " $2] = 1 }
		END {
			for (k in use) {
				split(k, p, " ")
				if ((p[2] in def) && def[p[2]] != p[1])
					print p[1], def[p[2]]
			}
		}' | sort -u
}

# a circle tsort names, or nothing
circle() {
	edges "$@" | tsort 2>&1 >/dev/null | sed 's/^tsort: //' || true
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'int b(void); int a(void) { return b(); }\n' >"$tmp/one.c"
printf 'int a(void); int b(void) { return a() + 1; }\n' >"$tmp/two.c"
${CC:-cc} -c "$tmp/one.c" -o "$tmp/one.o"
${CC:-cc} -c "$tmp/two.c" -o "$tmp/two.o"
if [ -z "$(circle "$tmp/one.o" "$tmp/two.o")" ]; then
	echo "deps: FAIL: two files calling each other were not caught" >&2
	exit 1
fi

loop=$(circle "$@")
if [ -n "$loop" ]; then
	echo "deps: FAIL: files that call each other in a circle:" >&2
	echo "$loop" >&2
	exit 1
fi

core=
glue=
for o in "$@"; do
	case $o in
	*/glue/*) glue="$glue $(basename "$o" .o)" ;;
	*) core="$core $(basename "$o" .o)" ;;
	esac
done
up=$(edges "$@" | while read -r user definer; do
	case " $core " in *" $user "*) ;; *) continue ;; esac
	case " $glue " in *" $definer "*) echo "$user -> $definer" ;; esac
done)
if [ -n "$up" ]; then
	echo "deps: FAIL: the core calls the glue:" >&2
	echo "$up" >&2
	exit 1
fi
# tgt's worker threads tell each completion with kill(getpid(), SIGUSR2),
# which the kernel places by walking every tgtd thread: the glue runs
# its own (glue/workers.c) and takes none of tgt's
tgt_workers=$(for o in "$@"; do nm -u "$o"; done |
	      awk '$2 ~ /^bs_thread_/ { print $2 }' | sort -u)
if [ -n "$tgt_workers" ]; then
	echo "deps: FAIL: the module uses tgt's worker threads:" $tgt_workers >&2
	exit 1
fi
echo "deps: ok ($# objects, $(edges "$@" | wc -l) dependencies, no circle," \
     "none of tgt's workers)"
