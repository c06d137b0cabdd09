/* CDB decoding: field positions and flags for every handled opcode. */
#include <errno.h>

#include "core.h"
#include "unit.h"

static struct syncguard_cdb c;

START_TEST(test_cdb_read6_zero_means_256)
{
	uint8_t cdb[6] = { 0x08, 0x1f, 0xff, 0xfe, 0x00, 0 };

	ck_assert_int_eq(syncguard_cdb_decode(cdb, 6, &c), 0);
	ck_assert_int_eq(c.op, SYNCGUARD_OP_READ);
	ck_assert_uint_eq(c.lba, 0x1ffffe);
	ck_assert_uint_eq(c.nblocks, 256);
	ck_assert(!c.fua);
}
END_TEST

START_TEST(test_cdb_write10_fua_dpo)
{
	uint8_t cdb[10] = { 0x2a, 0x18, 0x12, 0x34, 0x56, 0x78, 0, 0x01,
			    0x02, 0 };

	ck_assert_int_eq(syncguard_cdb_decode(cdb, 10, &c), 0);
	ck_assert_int_eq(c.op, SYNCGUARD_OP_WRITE);
	ck_assert_uint_eq(c.lba, 0x12345678);
	ck_assert_uint_eq(c.nblocks, 0x102);
	ck_assert(c.fua);
	ck_assert(c.dpo);
	cdb[1] = 0x00;
	ck_assert_int_eq(syncguard_cdb_decode(cdb, 10, &c), 0);
	ck_assert(!c.fua);
	ck_assert(!c.dpo);
}
END_TEST

START_TEST(test_cdb_write12_write16)
{
	uint8_t w12[12] = { 0xaa, 0x08, 0, 0, 0x10, 0, 0, 0, 0x01, 0, 0, 0 };
	uint8_t w16[16] = { 0x8a, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
			    0x07, 0x08, 0x00, 0x01, 0x00, 0x00, 0, 0 };

	ck_assert_int_eq(syncguard_cdb_decode(w12, 12, &c), 0);
	ck_assert_uint_eq(c.lba, 0x1000);
	ck_assert_uint_eq(c.nblocks, 0x100);
	ck_assert(c.fua);
	ck_assert_int_eq(syncguard_cdb_decode(w16, 16, &c), 0);
	ck_assert_uint_eq(c.lba, 0x0102030405060708ull);
	ck_assert_uint_eq(c.nblocks, 0x10000);
	ck_assert(c.fua);
}
END_TEST

START_TEST(test_cdb_sync_cache)
{
	uint8_t sc10[10] = { 0x35, 0x02, 0, 0, 0, 0x20, 0, 0, 0x08, 0 };
	uint8_t sc16[16] = { 0x91, 0x00, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0,
			     0x10, 0, 0 };

	ck_assert_int_eq(syncguard_cdb_decode(sc10, 10, &c), 0);
	ck_assert_int_eq(c.op, SYNCGUARD_OP_SYNC_CACHE);
	ck_assert(c.immed);
	ck_assert_uint_eq(c.lba, 0x20);
	ck_assert_uint_eq(c.nblocks, 8);
	ck_assert_int_eq(syncguard_cdb_decode(sc16, 16, &c), 0);
	ck_assert(!c.immed);
	ck_assert_uint_eq(c.lba, 0x40);
	ck_assert_uint_eq(c.nblocks, 0x10);
}
END_TEST

START_TEST(test_cdb_write_same_flags)
{
	uint8_t ws16[16] = { 0x93, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0x05, 0, 0, 0,
			     0x00, 0, 0 };

	ck_assert_int_eq(syncguard_cdb_decode(ws16, 16, &c), 0);
	ck_assert_int_eq(c.op, SYNCGUARD_OP_WRITE_SAME);
	ck_assert(c.unmap);
	ck_assert(c.lbdata);
	ck_assert(!c.pbdata);
	ck_assert_uint_eq(c.nblocks, 0);	/* "to the end" stays 0 */
}
END_TEST

START_TEST(test_cdb_verify_bytchk_and_caw)
{
	uint8_t v10[10] = { 0x2f, 0x06, 0, 0, 0, 1, 0, 0, 1, 0 };
	uint8_t caw[16] = { 0x89, 0x08, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2,
			    0, 0 };

	ck_assert_int_eq(syncguard_cdb_decode(v10, 10, &c), 0);
	ck_assert_int_eq(c.op, SYNCGUARD_OP_VERIFY);
	ck_assert_uint_eq(c.bytchk, 3);
	ck_assert_int_eq(syncguard_cdb_decode(caw, 16, &c), 0);
	ck_assert_int_eq(c.op, SYNCGUARD_OP_COMPARE_AND_WRITE);
	ck_assert_uint_eq(c.lba, 9);
	ck_assert_uint_eq(c.nblocks, 2);
	ck_assert(c.fua);
}
END_TEST

START_TEST(test_cdb_errors)
{
	uint8_t inq[6] = { 0x12, 0, 0, 0, 36, 0 };
	uint8_t w16[16] = { 0x8a };

	ck_assert_int_eq(syncguard_cdb_decode(inq, 6, &c), -ENOTSUP);
	ck_assert_int_eq(syncguard_cdb_decode(w16, 10, &c), -EINVAL);
	ck_assert_int_eq(syncguard_cdb_decode(w16, 0, &c), -EINVAL);
}
END_TEST

Suite *cdb_suite(void)
{
	Suite *s = suite_create("cdb");
	TCase *tc = tcase_create("decode");

	tcase_add_test(tc, test_cdb_read6_zero_means_256);
	tcase_add_test(tc, test_cdb_write10_fua_dpo);
	tcase_add_test(tc, test_cdb_write12_write16);
	tcase_add_test(tc, test_cdb_sync_cache);
	tcase_add_test(tc, test_cdb_write_same_flags);
	tcase_add_test(tc, test_cdb_verify_bytchk_and_caw);
	tcase_add_test(tc, test_cdb_errors);
	suite_add_tcase(s, tc);
	return s;
}
