# syncguard: tgt backing store + libiscsi sync-write tester.
#
#   make demo      the main job: every mode x sync discipline, one table
#                  (installs missing Debian packages first, as root)
#   make check     every test (installs missing packages first)
#   make           build bs_syncguard.so and the tools
#   make install   install the module where tgtd loads it, the tools and
#                  the manual pages
#   make deb       the Debian package tgt-syncguard
#   make deps      only install the Debian packages (apt-get, as root)
#
# The module is compiled against the source of exactly the installed tgt
# (its plugin ABI is tgt's internal structs).  By default that source is
# fetched with a private apt configuration into build/tgt-src; set
# TGT_SRC=/path/to/tgt for a tgt built from source.

CC       ?= cc
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra
BASE     := -std=gnu11 -D_GNU_SOURCE -Iinclude -Icore $(WARN)
BUILD    := build
TGT_SRC  ?= $(BUILD)/tgt-src
BSDIR    ?= /usr/lib/tgt/backing-store
# the tests and the bench start several private tgtds at once: one pair
# of ports chosen for scripts/tgtd-private by hand would clash.  The demo
# starts one, and gets them (below).
unexport TGTD_PRIVATE_CTL TGTD_PRIVATE_PORT
DESTDIR  ?=
SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer \
	    -fno-sanitize-recover=undefined

DEB_PACKAGES := tgt libiscsi-dev libiscsi-bin check pkg-config dpkg-dev \
	gcc make util-linux mount iproute2 e2fsprogs btrfs-progs sdparm \
	libfuse3-dev fuse3 \
	liburing-dev gnuplot-nox jq binutils procps libjson-c-dev \
	nbdkit libnbd-bin groff-base man-db fio \
	$(GUEST_PACKAGES)
# the kernel initiator in a QEMU guest (make check-guest, tests/guest.sh)
GUEST_PACKAGES := qemu-system-x86 linux-image-amd64 open-iscsi \
	busybox-static cpio udev dmsetup

CORE_SRCS := core/sys.c core/opts.c core/policy.c core/cdb.c core/sense.c \
	     core/latch.c core/poison.c core/storeid.c core/lun.c \
	     core/fscheck.c core/io.c core/writesync.c core/trial.c \
	     core/plan.c core/exec.c core/flush.c core/stats.c core/mix.c \
	     core/loopdev.c core/mounts.c core/stack.c core/zvolname.c
CORE_PIC  := $(CORE_SRCS:%.c=$(BUILD)/pic/%.o)
CORE_SAN  := $(CORE_SRCS:%.c=$(BUILD)/san/%.o)
CORE_SANPIC := $(CORE_SRCS:%.c=$(BUILD)/sanpic/%.o)
HDRS      := include/syncguard_opts.h include/syncguard_stats.h core/core.h \
	     core/internal.h core/command.h

UNIT_SRCS  := tests/unit/main.c tests/unit/check_opts.c \
	      tests/unit/check_policy.c tests/unit/check_cdb.c \
	      tests/unit/check_exec.c tests/unit/check_flush.c \
	      tests/unit/check_plan.c tests/unit/check_errno.c \
	      tests/unit/check_stack.c tests/leftout.c
PROTO_SRCS := tests/proto/main.c tests/proto/fixture.c \
	      tests/proto/check_modes.c tests/proto/check_bsopts.c \
	      tests/proto/check_blockdev.c tests/proto/check_faults.c \
	      tests/proto/check_commands.c tests/proto/check_nbdkit.c \
	      tests/leftout.c

ISCSI_LIBS := $(shell pkg-config --libs libiscsi 2>/dev/null || echo -liscsi)
JSONC_LIBS := $(shell pkg-config --libs json-c 2>/dev/null || echo -ljson-c)
FUSE_CFLAGS := $(shell pkg-config --cflags fuse3 2>/dev/null || echo -I/usr/include/fuse3)
FUSE_LIBS  := $(shell pkg-config --libs fuse3 2>/dev/null || echo -lfuse3 -lpthread)
TOOLS      := tools/iscsi-syncbench tools/iscsi-crashtest \
	      tools/syncguard-devmodel tools/iscsi-cdbfuzz tools/syncguard-stat
FUZZ_COUNT ?= 1000000
CUTS       ?= 1000
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck)

.PHONY: all deps install uninstall demo demo-run check check-all check-unit \
	check-proto \
	check-crash crashtest check-fuzz fuzz check-lifecycle soak conformance \
	check-conf check-tools check-stall check-syscalls check-deps check-names \
	check-history check-man check-deb check-guest \
	check-bench bench bench-run clean \
	tgt-src deb FORCE

# the manual pages: two printed by their tool from its own option or
# field table, bs_syncguard(8) with the bsopts table of core/opts.c
MANS := tools/iscsi-syncbench.1 tools/syncguard-stat.1 \
	man/openiscsi-syncbench.1 man/bs_syncguard.8

all: bs_syncguard.so $(TOOLS) $(MANS)

deps:
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y $(DEB_PACKAGES)

# ---- tgt headers ----
# The fetch script rewrites the version stamp only when the installed
# tgt changed, so the module is rebuilt exactly then.
ifeq ($(TGT_SRC),$(BUILD)/tgt-src)
$(TGT_SRC)/.syncguard-tgt-version: FORCE
	@scripts/fetch-tgt-src.sh $(TGT_SRC)
else
$(TGT_SRC)/.syncguard-tgt-version:
	@test -f $(TGT_SRC)/usr/tgtd.h || \
	  { echo "TGT_SRC=$(TGT_SRC) has no usr/tgtd.h" >&2; exit 1; }
	@echo custom > $@
endif
tgt-src: $(TGT_SRC)/.syncguard-tgt-version

# The installed tgtd's build ID: the module refuses to register in any
# other tgtd (bs_syncguard.c, built_for_this_tgtd).  Not for a custom
# TGT_SRC, whose tgtd may not be the installed one.
ifeq ($(TGT_SRC),$(BUILD)/tgt-src)
TGTD_BUILD_ID := $(shell readelf -n "$$(command -v tgtd)" 2>/dev/null | \
		   awk '/Build ID/ { print $$3; exit }')
endif
ABI_FLAGS := -DSYNCGUARD_TGTD_BUILD_ID='"$(TGTD_BUILD_ID)"'

# ---- the module ----
$(BUILD)/pic/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(BUILD)/san/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O1 -g $(SAN) -c $< -o $@

$(BUILD)/sanpic/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O1 -g $(SAN) -fPIC -fvisibility=hidden -c $< -o $@

# the glue: compiled against tgt's internal headers
# the front door (bs_syncguard.c) and the rest of the glue (glue/)
GLUE_SRCS := bs_syncguard.c glue/cmdtable.c glue/admin.c glue/wce.c \
	     glue/synccache.c glue/vpd.c glue/answer.c glue/uring.c glue/watch.c \
	     glue/zvolwatch.c glue/workers.c
GLUE_HDRS := glue/glue.h $(HDRS) $(TGT_SRC)/.syncguard-tgt-version
GLUE_PIC  := $(patsubst %.c,$(BUILD)/pic/glue/%.o,$(notdir $(GLUE_SRCS)))
GLUE_SANPIC := $(patsubst %.c,$(BUILD)/sanpic/glue/%.o,$(notdir $(GLUE_SRCS)))
TGT_INC   := -Iglue -isystem $(TGT_SRC)/usr

$(BUILD)/pic/glue/%.o: glue/%.c $(GLUE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -fvisibility=hidden $(TGT_INC) \
	  $(ABI_FLAGS) -c $< -o $@

$(BUILD)/sanpic/glue/%.o: glue/%.c $(GLUE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O1 -g $(SAN) -fPIC -fvisibility=hidden $(TGT_INC) \
	  $(ABI_FLAGS) -c $< -o $@

$(BUILD)/pic/glue/bs_syncguard.o: bs_syncguard.c $(GLUE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -fvisibility=hidden $(TGT_INC) \
	  $(ABI_FLAGS) -c $< -o $@

$(BUILD)/sanpic/glue/bs_syncguard.o: bs_syncguard.c $(GLUE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -O1 -g $(SAN) -fPIC -fvisibility=hidden $(TGT_INC) \
	  $(ABI_FLAGS) -c $< -o $@

# the front door built for another tgtd (tests/abi.sh)
$(BUILD)/abi/glue/bs_syncguard.o: bs_syncguard.c $(GLUE_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -fvisibility=hidden $(TGT_INC) \
	  -DSYNCGUARD_TGTD_BUILD_ID='"0000"' -c $< -o $@

# link a module: $(call link_module,compiler flags,objects)
define link_module
	@mkdir -p $(dir $@)
	$(CC) $(1) -fPIC -shared $(2) -o $@ -luring -lpthread
endef

bs_syncguard.so: $(GLUE_PIC) $(CORE_PIC)
	$(call link_module,$(CFLAGS),$(GLUE_PIC) $(CORE_PIC))

# the same module under AddressSanitizer and UndefinedBehaviorSanitizer,
# for the fuzz tests (tgtd runs with libasan preloaded)
$(BUILD)/san/bs_syncguard.so: $(GLUE_SANPIC) $(CORE_SANPIC)
	$(call link_module,-O1 -g $(SAN),$(GLUE_SANPIC) $(CORE_SANPIC))

$(BUILD)/manopts: tools/manopts.c tools/roff.h core/opts.c \
		  include/syncguard_opts.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE) -Itools $(CFLAGS) tools/manopts.c core/opts.c -o $@

man/bs_syncguard.8: man/bs_syncguard.8.in $(BUILD)/manopts
	$(BUILD)/manopts $< > $@.tmp && mv $@.tmp $@

# PREFIX for the tools and manual pages (make deb: /usr); the module goes
# where tgtd looks (BSDIR)
PREFIX ?= /usr/local
BINS := tools/iscsi-syncbench tools/openiscsi-syncbench tools/syncguard-stat

# openiscsi-syncbench's fio job files, where it looks for them
FIO_JOBS := $(wildcard conf/fio/*.fio)
JOBDIR = $(PREFIX)/share/syncguard/fio

install: bs_syncguard.so $(BINS) $(MANS)
	install -D -m 0644 bs_syncguard.so $(DESTDIR)$(BSDIR)/bs_syncguard.so
	for j in $(FIO_JOBS); do \
	  install -D -m 0644 $$j $(DESTDIR)$(JOBDIR)/$$(basename $$j) \
	  || exit 1; done
	for b in $(BINS); do \
	  install -D -m 0755 $$b $(DESTDIR)$(PREFIX)/bin/$$(basename $$b) \
	  || exit 1; done
	for m in $(MANS); do \
	  s=$${m##*.}; install -D -m 0644 $$m \
	  $(DESTDIR)$(PREFIX)/share/man/man$$s/$$(basename $$m) || exit 1; done

# the Debian package tgt-syncguard, for the installed tgt exactly
VERSION := 0.9
deb: bs_syncguard.so $(BINS) $(MANS)
	BSDIR=$(BSDIR) scripts/mkdeb.sh $(VERSION) $(BUILD)

# the package installs with apt, loads in a private tgtd from tgtd's own
# directory, and purges leaving nothing (a module make install put there
# is put back)
check-deb: bs_syncguard.so $(BINS) $(MANS)
	deb=$$(BSDIR=$(BSDIR) scripts/mkdeb.sh $(VERSION) $(BUILD)) && \
	  tests/deb.sh "$$deb"

# every manual page renders without a warning
check-man: $(MANS)
	@for m in $(MANS); do \
	  out=$$(groff -man -Tutf8 -ww -z $$m 2>&1); \
	  [ -z "$$out" ] || { echo "man: $$m: $$out" >&2; exit 1; }; \
	  man -l $$m >/dev/null || exit 1; \
	  left=$$(MANWIDTH=80 man -l $$m 2>/dev/null | \
	    grep -nE '\.(br|TP|BI|BR|SH|PP|nf|fi)([[:space:]]|$$)|@[A-Z]+@'); \
	  [ -z "$$left" ] || { echo "man: $$m: roff left in the text:" \
	    "$$left" >&2; exit 1; }; \
	done; echo "man: ok ($(words $(MANS)) pages)"

uninstall:
	rm -f $(DESTDIR)$(BSDIR)/bs_syncguard.so
	for b in $(BINS); do rm -f $(DESTDIR)$(PREFIX)/bin/$$(basename $$b); done
	for j in $(FIO_JOBS); do rm -f $(DESTDIR)$(JOBDIR)/$$(basename $$j); done
	-rmdir $(DESTDIR)$(JOBDIR) $(DESTDIR)$(PREFIX)/share/syncguard 2>/dev/null
	for m in $(MANS); do \
	  rm -f $(DESTDIR)$(PREFIX)/share/man/man$${m##*.}/$$(basename $$m); done

# ---- the tester ----
SYNCBENCH_SRCS := $(wildcard tools/syncbench/*.c) tools/histogram.c \
		  tools/statsfile.c core/opts.c
SYNCBENCH_HDRS := $(wildcard tools/syncbench/*.h) tools/histogram.h \
		  tools/toolutil.h tools/statsfile.h \
		  include/syncguard_stats.h include/syncguard_opts.h

tools/iscsi-syncbench: $(SYNCBENCH_SRCS) $(SYNCBENCH_HDRS)
	$(CC) $(BASE) -Itools -Itools/syncbench $(CFLAGS) \
	  -DSYNCGUARD_VERSION='"$(VERSION)"' $(SYNCBENCH_SRCS) \
	  -o $@ $(ISCSI_LIBS) $(JSONC_LIBS) -lm

# the manual pages, printed from the option and field tables
tools/iscsi-syncbench.1: tools/iscsi-syncbench
	tools/iscsi-syncbench --man > $@

tools/syncguard-stat.1: tools/syncguard-stat
	tools/syncguard-stat --man > $@

tools/iscsi-crashtest: tools/iscsi-crashtest.c tools/toolutil.h
	$(CC) $(BASE) $(CFLAGS) $< -o $@ $(ISCSI_LIBS)

STAT_CORE := core/sys.c core/opts.c core/poison.c core/storeid.c core/latch.c \
	     core/mounts.c \
	     core/policy.c core/zvolname.c
tools/syncguard-stat: tools/syncguard-stat.c tools/statsfile.c tools/roff.h \
		      tools/statsfile.h tools/prometheus.c tools/prometheus.h \
		      $(STAT_CORE) $(HDRS)
	$(CC) $(BASE) -Itools $(CFLAGS) tools/syncguard-stat.c \
	  tools/statsfile.c tools/prometheus.c $(STAT_CORE) -o $@ -lpthread

tools/iscsi-cdbfuzz: tools/iscsi-cdbfuzz.c tools/toolutil.h
	$(CC) $(BASE) $(CFLAGS) $< -o $@ $(ISCSI_LIBS)

tools/syncguard-devmodel: tools/syncguard-devmodel.c tools/toolutil.h
	$(CC) $(BASE) $(FUSE_CFLAGS) $(CFLAGS) $< -o $@ $(FUSE_LIBS)

# ---- tests ----
$(BUILD)/unit-tests: $(UNIT_SRCS) $(CORE_SAN) $(HDRS) tests/unit/unit.h \
		     tests/leftout.h
	$(CC) $(BASE) -Itests -O1 -g $(SAN) $(UNIT_SRCS) $(CORE_SAN) -o $@ \
	  $(CHECK_LIBS) -lpthread

$(BUILD)/proto-tests: $(PROTO_SRCS) tests/proto/proto.h tests/leftout.h
	$(CC) $(BASE) -Itests -Itests/proto $(CFLAGS) $(PROTO_SRCS) -o $@ \
	  $(ISCSI_LIBS) $(CHECK_LIBS) -lpthread

# make check and make demo first install what a fresh Debian 12 lacks
# (the missing packages of DEB_PACKAGES, then tgt's source as the build
# fetches it), then run in a make that sees them
check:
	@scripts/need-deps.sh $(DEB_PACKAGES)
	@$(MAKE) --no-print-directory check-all
	@echo "make check: every test passed (the lines above say what each ran)"

check-all: check-unit check-proto check-names check-conf check-tools \
	check-stall check-syscalls check-deps check-history check-man \
	check-deb check-fuzz check-lifecycle check-crash check-bench

# each test binary writes the tests that passed (TAP) and those it left
# out, with the reason (tests/leftout.h), for check-names
check-unit: $(BUILD)/unit-tests check-syscalls check-deps tools/syncguard-devmodel
	rm -f $(BUILD)/unit.left-out
	CK_TAP_LOG_FILE_NAME=$(BUILD)/unit.tap \
	SYNCGUARD_LEFT_OUT=$(CURDIR)/$(BUILD)/unit.left-out $(BUILD)/unit-tests

# no citation of who found what, no commit hash, no date outside
# docs/bench-history.md
check-history:
	tests/history.sh

# every test in tests/names.txt passed or was left out with its reason;
# no test outside the list ran (tests/names.sh --update rewrites it)
check-names: check-unit check-proto
	tests/names.sh $(BUILD)/unit.tap $(BUILD)/unit.left-out \
	  $(BUILD)/proto.tap $(BUILD)/proto.left-out

# durability calls only through syncguard_sys (the errno matrix's table)
check-syscalls: $(CORE_PIC) $(GLUE_PIC)
	tests/syscalls.sh $(BUILD)/pic/core/sys.o $(CORE_PIC) $(GLUE_PIC)

# the module's files depend on each other one way (no circles; the core
# never calls the glue)
check-deps: $(CORE_PIC) $(GLUE_PIC)
	tests/deps.sh $(CORE_PIC) $(GLUE_PIC)

# a shim under iscsi-syncbench: what iscsi-syncbench puts on the wire
$(BUILD)/wirecheck.so: tests/wirecheck.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) -fPIC -shared $< -o $@ -ldl -lpthread

# a helper of the protocol tests (fscrypt, cachestat)
$(BUILD)/fsprobe: tests/fsprobe.c
	$(CC) $(BASE) $(CFLAGS) $< -o $@

check-proto: $(BUILD)/proto-tests bs_syncguard.so $(TOOLS) $(BUILD)/fsprobe
	rm -f $(BUILD)/proto.left-out
	CK_TAP_LOG_FILE_NAME=$(BUILD)/proto.tap \
	SYNCGUARD_LEFT_OUT=$(CURDIR)/$(BUILD)/proto.left-out \
	SYNCGUARD_MODULE=$(CURDIR)/bs_syncguard.so \
	SYNCGUARD_TOP=$(CURDIR) $(BUILD)/proto-tests

# short power-cut run (make crashtest: CUTS per configuration, default 1000;
# 8 configurations, over an hour)
check-crash: bs_syncguard.so $(TOOLS)
	scripts/crashtest.sh --cuts 20

crashtest: bs_syncguard.so $(TOOLS)
	scripts/crashtest.sh --cuts $(CUTS)

# conf/targets.conf.example through tgt-admin, read back
check-conf: bs_syncguard.so $(TOOLS)
	tests/conf.sh

# iscsi-syncbench against a private tgtd; openiscsi-syncbench --dry-run;
# the module refusing a tgtd it was not built for
check-tools: bs_syncguard.so $(TOOLS) $(BUILD)/abi/bs_syncguard.so \
	     $(BUILD)/wirecheck.so
	tests/syncbench.sh
	tests/openiscsi.sh
	tests/abi.sh $(BUILD)/abi/bs_syncguard.so

# openiscsi-syncbench and conf/fio for real: Linux's initiator in a QEMU
# guest under TCG (standing in for a host with one; about 4.5 minutes, so
# not in check-all: .ci/run runs it after make check).  Left out, with
# the reason, where QEMU or the kernel image is missing.
check-guest: bs_syncguard.so $(TOOLS)
	@scripts/need-deps.sh $(GUEST_PACKAGES)
	tests/guest.sh

# a read of cached blocks answered while writes wait on a 15 s flush
# (io_uring submission batching must not hold it behind them); another
# LUN answered while a LUN delete's or tgtadm WCE=0's flush takes 15 s;
# group flushes answered while 4 x CPUs + 1 other LUNs' flushes are stuck
check-stall: bs_syncguard.so $(TOOLS)
	tests/stall.sh
	tests/stall-pool.sh || [ $$? -eq 77 ]

$(BUILD)/abi/bs_syncguard.so: $(BUILD)/abi/glue/bs_syncguard.o \
			      $(filter-out %/bs_syncguard.o,$(GLUE_PIC)) $(CORE_PIC)
	$(call link_module,$(CFLAGS),$^)

# LUNs deleted, targets offlined, tgtd killed and restarted under load,
# 64 sessions, sanitizers and LeakSanitizer on (make soak: the normal
# build, the load alone in 30 rounds of 60 s, tgtd's memory sampled)
check-lifecycle: $(BUILD)/san/bs_syncguard.so $(TOOLS)
	scripts/lifecycle.sh --seconds 6

soak: bs_syncguard.so $(TOOLS)
	scripts/lifecycle.sh --soak 1800

# libiscsi's iscsi-test-cu against every mode and tgt's rdwr, side by side
conformance: bs_syncguard.so
	scripts/conformance.sh

# CDB fuzzing against the sanitizer build (make fuzz: FUZZ_COUNT per mode)
check-fuzz: $(BUILD)/san/bs_syncguard.so $(TOOLS)
	scripts/fuzz.sh --count 20000

fuzz: $(BUILD)/san/bs_syncguard.so $(TOOLS)
	scripts/fuzz.sh --count $(FUZZ_COUNT)

# each mode's cells against their limit lines (tgt's null store, fio on
# the LUN's file); reports, never fails.  ARGS go to scripts/bench.sh:
# make bench ARGS=--quick (a few minutes), ARGS=--help
# (linux-perf: tgtd's system calls per command, a column left "-" where
# its perf cannot count them)
bench:
	@scripts/need-deps.sh $(DEB_PACKAGES) linux-perf
	@$(MAKE) --no-print-directory bench-run

bench-run: all $(BUILD)/freezeprobe
	scripts/bench.sh $(ARGS)

# the bench's probe of the host stopping the machine (scripts/freezeprobe.c)
$(BUILD)/freezeprobe: scripts/freezeprobe.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(CFLAGS) $< -o $@

# the bench's arithmetic on canned rounds, and its probe on a stopped
# process
check-bench: $(BUILD)/freezeprobe
	scripts/bench.sh --self-check

demo:
	@scripts/need-deps.sh $(DEB_PACKAGES)
	@$(MAKE) --no-print-directory demo-run \
	  TGTD_PRIVATE_CTL=$(TGTD_PRIVATE_CTL) \
	  TGTD_PRIVATE_PORT=$(TGTD_PRIVATE_PORT)

demo-run: all install
	TGTD_PRIVATE_CTL=$(TGTD_PRIVATE_CTL) \
	TGTD_PRIVATE_PORT=$(TGTD_PRIVATE_PORT) scripts/demo.sh

clean:
	rm -rf $(BUILD)/pic $(BUILD)/san $(BUILD)/sanpic $(BUILD)/abi \
	  $(BUILD)/unit-tests \
	  $(BUILD)/proto-tests bs_syncguard.so $(TOOLS) tools/iscsi-syncbench.1 \
	  tools/syncguard-stat.1 man/bs_syncguard.8 $(BUILD)/manopts \
	  $(BUILD)/freezeprobe
