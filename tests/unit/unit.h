/* Unit tests of the tgt-independent core: one Suite per file. */
#ifndef SYNCGUARD_UNIT_H
#define SYNCGUARD_UNIT_H

#include <check.h>

#include "leftout.h"

Suite *opts_suite(void);
Suite *policy_suite(void);
Suite *cdb_suite(void);
Suite *exec_suite(void);
Suite *flush_suite(void);
Suite *plan_suite(void);
Suite *errno_suite(void);
Suite *stack_suite(void);

#endif
