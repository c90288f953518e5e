/* runfile_pad: a partial run file cut short of the end its superblock stores (a rank that left
 * a collective flush, the others' rows never written) is refused by HDF5; padded at exit, it
 * opens, and the rows written are intact. The file is made by HDF5 itself, with the run file's
 * format bounds, and cut inside its last dataset's raw data, as the lost rows would be. */
#include <hdf5.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/runfile_pad.h"

enum { ROWS = 65536 };

static char path[256];

static long long file_size(void) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (long long)st.st_size;
}

/* A file of one dataset, ROWS doubles 1..ROWS, stored contiguously last in the file; returns the
 * offset where the cut goes: half way into the rows. */
static long long make_file(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    assert_true(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) >= 0);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    assert_true(file >= 0);
    hsize_t n = ROWS;
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t dset = H5Dcreate2(file, "rows", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT);
    assert_true(dset >= 0);
    static double rows[ROWS];
    for (int i = 0; i < ROWS; i++) rows[i] = i + 1;
    assert_true(H5Dwrite(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    const haddr_t at = H5Dget_offset(dset);
    H5Dclose(dset);
    H5Sclose(space);
    assert_true(H5Fclose(file) >= 0);
    H5Pclose(fapl);
    /* the rows end the file, so the cut loses rows only, as a flush's unwritten rows are */
    assert_int_equal((long long)at + (long long)sizeof rows, file_size());
    return (long long)at + (long long)sizeof rows / 2;
}

static hid_t try_open(void) {
    hid_t file;
    H5E_BEGIN_TRY { file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    return file;
}

static void test_cut_file_padded_opens(void **state) {
    (void)state;
    const long long cut = make_file(), whole = file_size();
    assert_int_equal(truncate(path, cut), 0);
    assert_true(try_open() < 0); /* HDF5: "truncated file" */
    runfile_pad_arm(path);
    runfile_pad_on_exit();
    runfile_pad_disarm();
    assert_int_equal(file_size(), whole);
    hid_t file = try_open();
    assert_true(file >= 0);
    hid_t dset = H5Dopen2(file, "rows", H5P_DEFAULT);
    static double rows[ROWS];
    assert_true(H5Dread(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    for (int i = 0; i < ROWS / 2; i++) assert_true(rows[i] == i + 1);
    for (int i = ROWS / 2; i < ROWS; i++) assert_true(rows[i] == 0); /* never written */
    H5Dclose(dset);
    H5Fclose(file);
}

static void test_disarmed_leaves_file(void **state) {
    (void)state;
    const long long cut = make_file();
    assert_int_equal(truncate(path, cut), 0);
    runfile_pad_arm(path);
    runfile_pad_disarm(); /* closed whole, or renamed */
    runfile_pad_on_exit();
    assert_int_equal(file_size(), cut);
}

static void test_whole_file_unchanged(void **state) {
    (void)state;
    make_file();
    const long long whole = file_size();
    runfile_pad_arm(path);
    runfile_pad_on_exit();
    runfile_pad_disarm();
    assert_int_equal(file_size(), whole); /* never shrinks, never grows a whole file */
}

static void test_not_hdf5_untouched(void **state) {
    (void)state;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    /* a superblock's look, but version 0 (whose layout differs), then a bogus version 2 with
     * 4-byte addresses: neither is read */
    const unsigned char v0[64] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n', 0, 8, 8};
    assert_int_equal(fwrite(v0, 1, sizeof v0, f), sizeof v0);
    fclose(f);
    runfile_pad_arm(path);
    runfile_pad_on_exit();
    assert_int_equal(file_size(), 64);
    f = fopen(path, "wb");
    unsigned char v2[64] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n', 2, 4, 4};
    v2[12 + 8] = 0xff; /* an end far beyond, were the addresses read as 8 bytes */
    assert_int_equal(fwrite(v2, 1, sizeof v2, f), sizeof v2);
    fclose(f);
    runfile_pad_on_exit();
    runfile_pad_disarm();
    assert_int_equal(file_size(), 64);
    runfile_pad_arm("/nonexistent-dir/run.h5.partial"); /* absent: nothing happens */
    runfile_pad_on_exit();
    runfile_pad_disarm();
}

int main(void) {
    snprintf(path, sizeof path, "%s/tripar_pad_%ld.h5", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long)getpid());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_file_padded_opens),
        cmocka_unit_test(test_disarmed_leaves_file),
        cmocka_unit_test(test_whole_file_unchanged),
        cmocka_unit_test(test_not_hdf5_untouched),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(path);
    return failed;
}
