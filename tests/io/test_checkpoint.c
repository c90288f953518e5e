/* import-hf and checkpoint validation, serial: every dtype/layout variant of the fixture
 * directories imports to exactly the values make_hf_dir.py expects; every malformed HF
 * directory and every damaged checkpoint is refused with a message naming the problem.
 * Needs the ckpt_hf fixture (CKPT_FIXTURES, written by tests/io/make_hf_dir.py --all). */
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

#include "base/check.h"
#include "cli/cli.h"
#include "io/checkpoint.h"
#include "io/h5util.h"

static const char *fixtures(void) {
    const char *dir = getenv("CKPT_FIXTURES");
    return dir ? dir : "ckpt_fixtures";
}

static int import_dir(const char *variant, const char *out) {
    char src[1024];
    snprintf(src, sizeof src, "%s/%s", fixtures(), variant);
    char *argv[] = {"import-hf", src, "--out", (char *)out, NULL};
    return import_hf_main(4, argv);
}

static void fixture_path(char *out, size_t len, const char *name) {
    snprintf(out, len, "%s/%s", fixtures(), name);
}

static void *file_read(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc((size_t)*len + 1);
    assert_int_equal(fread(buf, 1, (size_t)*len, f), (size_t)*len);
    fclose(f);
    return buf;
}

static void file_copy(const char *from, const char *to) {
    long len;
    void *buf = file_read(from, &len);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    free(buf);
}

typedef struct {
    const char *variant;
    int layers, heads, embd, vocab, ctx, mlp;
} variant_shape;

static void check_variant(const variant_shape *v) {
    char out[1024];
    snprintf(out, sizeof out, "%s/import_%s.h5", fixtures(), v->variant);
    assert_int_equal(import_dir(v->variant, out), 0);
    model_config cfg;
    if (checkpoint_read_config(out, &cfg) != STATUS_OK) fail_msg("%s", error_message());
    assert_int_equal(cfg.layers, v->layers);
    assert_int_equal(cfg.heads, v->heads);
    assert_int_equal(cfg.embd, v->embd);
    assert_int_equal(cfg.vocab, v->vocab);
    assert_int_equal(cfg.ctx, v->ctx);
    assert_int_equal(cfg.mlp, v->mlp);
    assert_true(cfg.ln_eps == 1e-5f);
    assert_int_equal(cfg.norm, NORM_PRE);

    hid_t file = h5_open_read(out);
    assert_true(file >= 0);
    for (int i = 0; i < CHECKPOINT_N_TENSORS; i++) {
        const char *name = checkpoint_tensor_names[i];
        char link[64], path[1024];
        snprintf(link, sizeof link, "/weights/%s", name);
        snprintf(path, sizeof path, "%s/%s/expected/%s.bin", fixtures(), v->variant, name);
        long bytes;
        float *want = file_read(path, &bytes);
        long shape[3];
        int nd = checkpoint_tensor_shape(&cfg, name, shape);
        long n = 1;
        for (int d = 0; d < nd; d++) n *= shape[d];
        assert_int_equal(bytes, n * (long)sizeof(float));
        float *got = malloc((size_t)bytes);
        hid_t dset = H5Dopen2(file, link, H5P_DEFAULT);
        assert_true(dset >= 0);
        assert_true(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
        H5Dclose(dset);
        /* bit-exact: F16/BF16 widen exactly, and transposes only move values */
        if (memcmp(got, want, (size_t)bytes) != 0)
            fail_msg("%s: /weights/%s differs from the expected values", v->variant, name);
        free(got);
        free(want);
    }
    H5Fclose(file);
}

static void test_import_variants(void **state) {
    (void)state;
    static const variant_shape variants[] = {
        {"f32", 2, 2, 16, 271, 32, 64},
        {"f16", 2, 2, 16, 271, 32, 64},
        {"bf16", 2, 2, 16, 271, 32, 64},     /* transformer. prefix, 3 shards, lm_head */
        {"f32-mlp", 3, 4, 16, 300, 32, 24}, /* n_inner, lm_head differs (warning) */
    };
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) check_variant(&variants[i]);
}

static void test_import_breaks(void **state) {
    (void)state;
    static const struct {
        const char *variant;
        const char *fragments[3];
    } cases[] = {
        {"break-header-size-zero", {"model.safetensors", "header size is 0"}},
        {"break-header-past-eof", {"model.safetensors", "past the end of the file"}},
        {"break-header-absurd", {"model.safetensors", "absurd"}},
        {"break-not-json", {"model.safetensors", "not valid JSON"}},
        {"break-offsets-out-of-range", {"'h.1.ln_1.weight'", "outside the data section"}},
        {"break-overlap", {"overlap", "'h.0.ln_1.weight'"}},
        {"break-unknown-dtype", {"'h.1.ln_1.weight'", "unsupported dtype 'F64'"}},
        {"break-shape-bytes-mismatch", {"'h.1.ln_1.weight'", "need 68"}},
        {"break-shape-config-mismatch", {"'h.1.mlp.c_fc.weight'", "[16, 72]", "config.json"}},
        {"break-missing-tensor", {"'h.1.attn.c_proj.bias'", "missing"}},
        {"break-extra-layer", {"'h.2.ln_1.weight'", "n_layer = 2"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[1024];
        snprintf(out, sizeof out, "%s/break_out.h5", fixtures());
        unlink(out);
        error_clear();
        assert_int_equal(import_dir(cases[i].variant, out), TRIPAR_EXIT_USAGE);
        for (int k = 0; k < 3 && cases[i].fragments[k]; k++)
            if (!strstr(error_message(), cases[i].fragments[k]))
                fail_msg("%s: message '%s' lacks '%s'", cases[i].variant, error_message(),
                         cases[i].fragments[k]);
        /* refused before anything is written */
        assert_int_equal(access(out, F_OK), -1);
    }
}

static void test_import_usage(void **state) {
    (void)state;
    char *none[] = {"import-hf", NULL};
    assert_int_equal(import_hf_main(1, none), TRIPAR_EXIT_USAGE);
    char *help[] = {"import-hf", "--help", NULL};
    assert_int_equal(import_hf_main(2, help), TRIPAR_EXIT_OK);
    char *noout[] = {"import-hf", "/nonexistent", NULL};
    assert_int_equal(import_hf_main(2, noout), TRIPAR_EXIT_USAGE);
    char *nodir[] = {"import-hf", "/nonexistent/dir", "--out", "/tmp/never.h5", NULL};
    assert_int_equal(import_hf_main(4, nodir), TRIPAR_EXIT_USAGE);
    assert_non_null(strstr(error_message(), "config.json"));
}

/* A good checkpoint to damage: the f32 import. */
static void good_checkpoint(char *out, size_t len) {
    snprintf(out, len, "%s/good.h5", fixtures());
    if (access(out, F_OK) != 0) assert_int_equal(import_dir("f32", out), 0);
}

static void expect_config_error(const char *path, const char *fragment) {
    model_config cfg;
    error_clear();
    assert_int_equal(checkpoint_read_config(path, &cfg), STATUS_BAD_INPUT);
    if (!strstr(error_message(), fragment))
        fail_msg("message '%s' lacks '%s'", error_message(), fragment);
    if (!strstr(error_message(), path)) fail_msg("message '%s' lacks the file name", error_message());
}

/* Superblock version 0 (what HDF5 writes by default) has no checksum and keeps the end-of-
 * file address at byte 40. Rewriting it makes HDF5 accept a truncated file, so the per-tensor
 * storage check has to catch it. */
static void superblock_eof_set(const char *path, uint64_t eof) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    unsigned char head[48];
    assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
    assert_int_equal(head[8], 0); /* superblock version 0 */
    for (int i = 0; i < 8; i++) head[40 + i] = (unsigned char)(eof >> (8 * i));
    fseek(f, 40, SEEK_SET);
    assert_int_equal(fwrite(head + 40, 1, 8, f), 8);
    fclose(f);
}

/* Where a tensor's stored data starts: its first chunk (tripar writes chunked datasets), or the
 * one block of a contiguous one. */
static haddr_t data_offset(const char *path, const char *link) {
    hid_t file = h5_open_read(path);
    hid_t dset = H5Dopen2(file, link, H5P_DEFAULT);
    assert_true(dset >= 0);
    hid_t dcpl = H5Dget_create_plist(dset);
    haddr_t offset = HADDR_UNDEF;
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t origin[3] = {0, 0, 0}, size = 0;
        unsigned mask = 0;
        assert_true(H5Dget_chunk_info_by_coord(dset, origin, &mask, &offset, &size) >= 0);
    } else {
        offset = H5Dget_offset(dset);
    }
    assert_true(offset != HADDR_UNDEF);
    H5Pclose(dcpl);
    H5Dclose(dset);
    H5Fclose(file);
    return offset;
}

static void test_read_config_truncated(void **state) {
    (void)state;
    char good[1024], bad[1024];
    good_checkpoint(good, sizeof good);
    fixture_path(bad, sizeof bad, "truncated.h5");
    struct stat st;
    assert_int_equal(stat(good, &st), 0);
    const long size = (long)st.st_size;
    const long cuts[] = {size - 1, size - 1000, size * 3 / 4, size / 2, 4096, 100};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        file_copy(good, bad);
        assert_int_equal(truncate(bad, cuts[i]), 0);
        expect_config_error(bad, "truncated");
    }
    file_copy(good, bad);
    assert_int_equal(truncate(bad, 7), 0);
    expect_config_error(bad, "not an HDF5 file");

    /* truncated inside the raw data of the last tensor (lnf_b ends the file when there is no
     * tokenizer), superblock patched to agree: the tensor whose bytes are gone is named */
    char nt[1024];
    fixture_path(nt, sizeof nt, "no_tokenizer.h5");
    assert_int_equal(import_dir("f32-mlp", nt), 0);
    haddr_t offset = data_offset(nt, "/weights/lnf_b");
    file_copy(nt, bad);
    assert_int_equal(truncate(bad, (off_t)offset + 20), 0);
    superblock_eof_set(bad, (uint64_t)offset + 20);
    expect_config_error(bad, "tensor 'lnf_b' extends past the end of the file (truncated");
    /* cut earlier, the group's link index goes first */
    file_copy(good, bad);
    offset = data_offset(good, "/weights/fc1_w");
    assert_int_equal(truncate(bad, (off_t)offset + 100), 0);
    superblock_eof_set(bad, (uint64_t)offset + 100);
    expect_config_error(bad, "truncated");
}

/* Copies the good checkpoint and lets edit change it through HDF5. */
static void damaged_copy(const char *bad, void (*edit)(hid_t file)) {
    char good[1024];
    good_checkpoint(good, sizeof good);
    file_copy(good, bad);
    hid_t file = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(file >= 0);
    edit(file);
    H5Fclose(file);
}

static void edit_format(hid_t file) { h5_attr_write_string(file, "format", "tripar-run"); }
static void edit_version(hid_t file) { h5_attr_write_int(file, "format_version", 7); }
static void edit_no_heads(hid_t file) { H5Adelete(file, "heads"); }
static void edit_norm(hid_t file) { h5_attr_write_string(file, "norm", "sandwich"); }
static void edit_missing(hid_t file) { H5Ldelete(file, "/weights/fc1_w", H5P_DEFAULT); }

static void dataset_replace(hid_t file, const char *link, hid_t type, int ndims,
                            const hsize_t *dims, hid_t dcpl) {
    H5Ldelete(file, link, H5P_DEFAULT);
    hid_t space = H5Screate_simple(ndims, dims, NULL);
    hid_t dset = H5Dcreate2(file, link, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(dset >= 0);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    double *zeros = calloc((size_t)n, sizeof(double));
    assert_true(H5Dwrite(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros) >= 0);
    free(zeros);
    H5Dclose(dset);
    H5Sclose(space);
}

static void edit_shape(hid_t file) {
    hsize_t dims[2] = {2, 65};
    dataset_replace(file, "/weights/fc1_b", H5T_IEEE_F32LE, 2, dims, H5P_DEFAULT);
}
static void edit_dtype(hid_t file) {
    hsize_t dims[1] = {16};
    dataset_replace(file, "/weights/lnf_g", H5T_IEEE_F64LE, 1, dims, H5P_DEFAULT);
}
static void edit_unlink_wpe(hid_t file) { H5Ldelete(file, "/weights/wpe", H5P_DEFAULT); }
/* In a second session (free space is not kept across sessions), so the chunks go at the end. */
static void edit_chunked(hid_t file) {
    hsize_t dims[2] = {32, 16}, chunk[2] = {8, 16};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    dataset_replace(file, "/weights/wpe", H5T_IEEE_F32LE, 2, dims, dcpl);
    H5Pclose(dcpl);
}

/* wpe chunked, with only its first chunk of rows written: the others were never allocated. */
static void edit_unwritten_chunk(hid_t file) {
    H5Ldelete(file, "/weights/wpe", H5P_DEFAULT);
    hsize_t dims[2] = {32, 16}, chunk[2] = {8, 16}, start[2] = {0, 0};
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dset = H5Dcreate2(file, "/weights/wpe", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl,
                            H5P_DEFAULT);
    assert_true(dset >= 0);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, chunk, NULL);
    hid_t mspace = H5Screate_simple(2, chunk, NULL);
    float zeros[8 * 16] = {0};
    assert_true(H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, space, H5P_DEFAULT, zeros) >= 0);
    H5Sclose(mspace);
    H5Sclose(space);
    H5Dclose(dset);
    H5Pclose(dcpl);
}

static void test_read_config_damaged(void **state) {
    (void)state;
    char bad[1024];
    fixture_path(bad, sizeof bad, "damaged.h5");
    damaged_copy(bad, edit_format);
    expect_config_error(bad, "not a tripar checkpoint (format is 'tripar-run'");
    damaged_copy(bad, edit_version);
    expect_config_error(bad, "format_version 7");
    damaged_copy(bad, edit_no_heads);
    expect_config_error(bad, "'heads'");
    damaged_copy(bad, edit_norm);
    expect_config_error(bad, "sandwich");
    damaged_copy(bad, edit_missing);
    expect_config_error(bad, "tensor 'fc1_w' is missing");
    damaged_copy(bad, edit_shape);
    expect_config_error(bad, "tensor 'fc1_b' has shape (2, 65), expected (2, 64)");
    damaged_copy(bad, edit_dtype);
    expect_config_error(bad, "tensor 'lnf_g' is not float32");
    expect_config_error("/nonexistent/ckpt.h5", "cannot open checkpoint");
    damaged_copy(bad, edit_unwritten_chunk);
    expect_config_error(bad, "tensor 'wpe' has no stored data from element (8, 0) on");

    /* a chunked dataset (as other tools might write) is accepted ... */
    damaged_copy(bad, edit_unlink_wpe);
    hid_t file = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    edit_chunked(file);
    H5Fclose(file);
    model_config cfg;
    if (checkpoint_read_config(bad, &cfg) != STATUS_OK) fail_msg("%s", error_message());
    /* ... and its chunks are bounds-checked too: cut into the last one */
    file = h5_open_read(bad);
    hid_t dset = H5Dopen2(file, "/weights/wpe", H5P_DEFAULT);
    hid_t space = H5Dget_space(dset);
    hsize_t coords[2], size, last_end = 0;
    unsigned mask;
    haddr_t addr;
    for (hsize_t c = 0; c < 4; c++) {
        assert_true(H5Dget_chunk_info(dset, space, c, coords, &mask, &addr, &size) >= 0);
        if (addr + size > last_end) last_end = addr + size;
    }
    H5Sclose(space);
    H5Dclose(dset);
    H5Fclose(file);
    struct stat st;
    assert_int_equal(stat(bad, &st), 0);
    assert_true((long long)last_end == (long long)st.st_size);
    assert_int_equal(truncate(bad, (off_t)(last_end - 100)), 0);
    superblock_eof_set(bad, last_end - 100);
    expect_config_error(bad, "tensor 'wpe' extends past the end of the file");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_variants),
        cmocka_unit_test(test_import_breaks),
        cmocka_unit_test(test_import_usage),
        cmocka_unit_test(test_read_config_truncated),
        cmocka_unit_test(test_read_config_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
