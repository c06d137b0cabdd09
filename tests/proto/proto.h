/*
 * Protocol tests: a private tgtd with the freshly built module, talked to
 * over loopback with libiscsi.  One Suite per file; every TCase starts
 * its own tgtd (unchecked fixture, in the parent) and stops it, also
 * when a test fails or the run is interrupted.
 */
#ifndef SYNCGUARD_PROTO_H
#define SYNCGUARD_PROTO_H

#include <check.h>

#include "leftout.h"
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

/* The target's name, with the test run's pid in it: two runs on one host
 * (a developer's beside CI's) would publish their counters under one name
 * and read none (/run/syncguard/TARGET).  Set in the parent before any
 * test forks (main). */
const char *proto_iqn(void);
#define PROTO_IQN proto_iqn()
#define PROTO_TID 1

Suite *modes_suite(void);
Suite *bsopts_suite(void);
Suite *blockdev_suite(void);
Suite *faults_suite(void);
Suite *commands_suite(void);
Suite *nbdkit_suite(void);

/* Create the scratch directory (proto_dir) before tgtd starts: mounts
 * made there later are invisible in tgtd's private mount namespace. */
void proto_prepare(void);

/* Start a private tgtd with target PROTO_TID; aborts the run on failure. */
void proto_tgtd_start(void);

/* Stop it (offline, delete targets, delete system; SIGKILL at last). */
void proto_tgtd_stop(void);

/* proto_sh, inside the private tgtd's mount name space (a mount made
 * there is tgtd's alone, and a remount there is signalled to it). */
int proto_sh_in_tgtd(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Is the private tgtd still running? */
/* send tgtd signal @sig ("STOP", "CONT"): 0, or the shell's status */
int proto_tgtd_signal(const char *sig);
bool proto_tgtd_alive(void);

/* tgtd's threads named "tgtd" (its event thread and the LUNs' worker
 * threads; not io_uring's io-wq workers, which come and go), or -1 */
long long proto_tgtd_threads(void);

/* the io_uring instances tgtd holds (its descriptors), or -1 */
long long proto_tgtd_rings(void);

/* the number of tgtd.log lines that contain @needle */
int proto_log_count(const char *needle);

/* Does tgtd's log contain @needle on one line? */
bool proto_log_has(const char *needle);

/* Add LUN @lun on @path; @bsopts and @blocksize (bytes) may be NULL/0.
 * Returns tgtadm's exit status (0 = created). */
int proto_add_lun(int lun, const char *path, const char *bsopts,
		  unsigned int blocksize);

/* Delete LUN @lun; returns tgtadm's exit status. */
int proto_del_lun(int lun);
/* Delete every LUN of target PROTO_TID numbered above @keep (LUN 0 is
 * the controller; a TCase's unchecked fixture adds LUNs 1 to @keep): for
 * a checked fixture, so that a test that failed before deleting its
 * LUNs does not fail the ones after it.  0, or the shell's status. */
int proto_del_left_luns(int keep);
/* tgtadm --op update --mode logicalunit --params @params: 0 or the
 * command's exit status (its stderr is dropped). */
int proto_update_lun(int lun, const char *params);
/* tgtadm --lld iscsi with the arguments @fmt makes, on target PROTO_TID's
 * tgtd: 0 or the command's exit status (its output is dropped). */
int proto_adm(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Does tgtadm --op show list LUN @lun of target PROTO_TID with a line
 * that contains @text? */
bool proto_lun_shows(int lun, const char *text);

/* A file of @bytes in the test's scratch directory, fully written
 * (zeroes) unless @sparse; returns its path (static storage per name). */
const char *proto_file(const char *name, uint64_t bytes, bool sparse);

/* The scratch directory (under build/, never tmpfs). */
const char *proto_dir(void);

/* The URL of LUN @lun on the private tgtd (static storage). */
const char *proto_url(int lun);

/* Log in to LUN @lun; fails the test if that is not possible. */
struct iscsi_context *proto_connect(int lun);
/* The same for the LUN of iscsi:// URL @url (another tgtd's, say). */
struct iscsi_context *proto_connect_url(const char *url);

/* The private tgtd's state directory for latch records (tgtd-private
 * sets its SYNCGUARD_STATE_DIR: core/poison.c), and its records removed,
 * for a checked fixture (a test's latch must not outlive it). */
const char *proto_state_dir(void);
int proto_clear_latches(void);

/* fork() for a test's helper session: 0 in the child, which dies with
 * the test process (PR_SET_PDEATHSIG); its pid in the test. */
pid_t proto_child(void);

/* End child @pid: -1 if it was still running (it is killed), else its
 * exit status. */
int proto_child_end(pid_t pid);

/* Write LBA @lba of LUN @lun (@bs-byte blocks) @writes times, each
 * block holding its number, FUA if @fua, and read it back after each,
 * while two other sessions keep reading it: how many reads returned
 * something else than the write just answered GOOD, the first such
 * write's number in *@first. */
uint32_t proto_stale_reads(int lun, unsigned int bs, uint64_t lba,
			   uint32_t writes, bool fua, uint32_t *first);

/* Run a shell command; returns its exit status (-1 if it died). */
int proto_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Run a shell command; the number it prints first, or -1. */
long long proto_sh_number(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Lower tgtd's soft RLIMIT_NOFILE to its lowest free descriptor (no new
 * descriptor can be opened), and put it back; exit statuses, 0 done. */
int proto_nofile_limit(void);
int proto_nofile_restore(void);

/* Assert @t completed with CHECK CONDITION, sense @key and @ascq
 * (ASC << 8 | ASCQ); frees @t. */
void proto_assert_sense(struct scsi_task *t, int key, int ascq,
			const char *what);

/* Assert @t completed GOOD; frees @t unless @keep. */
void proto_assert_good(struct scsi_task *t, const char *what, bool keep);

/* MODE SELECT(6) of the Caching page with WCE = @wce (the page as MODE
 * SENSE(6) shows it otherwise); the task, for the caller to check. */
struct scsi_task *proto_select_wce(struct iscsi_context *iscsi, int lun,
				   int wce);

/* From now on, every SCSI Command this process sends whose CDB starts
 * with @opcode carries task attribute @attr (RFC 7143 11.3.1: 1 SIMPLE,
 * 2 ORDERED, 3 HEAD OF QUEUE), not libiscsi's SIMPLE; @opcode -1
 * stops. */
void proto_task_attribute(int opcode, int attr);

/* LUN @lun's counter @field (a key of syncguard-stat --json: "errors",
 * "wce", ...); -1 when there is none. */
long long proto_counter(int lun, const char *field);

/* WCE from MODE SENSE(10) Caching page and DPOFUA; -1 if unreadable. */
void proto_caching(struct iscsi_context *iscsi, int lun, int *wce,
		   int *dpofua);

#endif
