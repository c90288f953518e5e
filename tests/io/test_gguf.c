/* GGUF reader on files built here in memory (read through fmemopen): the typed getters and
 * their messages, element access, a tensor read (and one from a file cut after opening), and
 * the refusals the crafted files of tests/io/make_gguf_bad.py do not reach (big-endian,
 * repeats, bad bools, dimensions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/gguf.h"
#include "io/gguf_dequant.h"

/* A growing byte buffer the tests write GGUF fields into. */
typedef struct {
    uint8_t buf[40000];
    size_t len;
} blob;

static void put(blob *b, const void *p, size_t n) {
    assert_true(b->len + n <= sizeof b->buf);
    memcpy(b->buf + b->len, p, n);
    b->len += n;
}
static void put_u32(blob *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}
static void put_u64(blob *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(blob *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void head(blob *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->len = 0;
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void kv_u32(blob *b, const char *key, uint32_t type, uint32_t v) {
    put_str(b, key);
    put_u32(b, type);
    put(b, &v, gguf_type_size((gguf_type)type)); /* little-endian host */
}

/* Opens b; returns the status, with the message in error_message(). */
static status blob_open(gguf *g, blob *b) {
    FILE *fp = fmemopen(b->buf, b->len, "rb");
    assert_non_null(fp);
    status s = gguf_open_stream(g, fp, "mem.gguf");
    if (s == STATUS_OK) {
        g->owns_fp = 1; /* closed with g */
    } else {
        fclose(fp);
    }
    return s;
}

static void expect_refused(blob *b, const char *message) {
    gguf g;
    assert_int_equal(blob_open(&g, b), STATUS_BAD_INPUT);
    if (!strstr(error_message(), message))
        fail_msg("message '%s' lacks '%s'", error_message(), message);
}

static void expect_get_error(status s, const char *message) {
    assert_int_equal(s, STATUS_BAD_INPUT);
    if (!strstr(error_message(), message))
        fail_msg("message '%s' lacks '%s'", error_message(), message);
}

/* Metadata of each kind, then one Q8_0 tensor of 32 x 2 with scales 0.5 and 1.5. */
static void good_file(blob *b) {
    head(b, 3, 1, 8);
    kv_u32(b, "x.u8", GGUF_TYPE_UINT8, 200);
    kv_u32(b, "x.i16", GGUF_TYPE_INT16, 0xFFFE); /* -2 */
    kv_u32(b, "x.u32", GGUF_TYPE_UINT32, 4000000000u);
    put_str(b, "x.u64");
    put_u32(b, GGUF_TYPE_UINT64);
    put_u64(b, UINT64_MAX);
    kv_u32(b, "x.f32", GGUF_TYPE_FLOAT32, 0x3FC00000u); /* 1.5 */
    kv_u32(b, "x.flag", GGUF_TYPE_BOOL, 1);
    put_str(b, "x.words");
    put_u32(b, GGUF_TYPE_ARRAY);
    put_u32(b, GGUF_TYPE_STRING);
    put_u64(b, 2);
    put_str(b, "alpha");
    put_str(b, "");
    put_str(b, "x.empty");
    put_u32(b, GGUF_TYPE_ARRAY);
    put_u32(b, GGUF_TYPE_INT64);
    put_u64(b, 0);
    put_str(b, "w");
    put_u32(b, 2);
    put_u64(b, 32);
    put_u64(b, 2);
    put_u32(b, GGML_TYPE_Q8_0);
    put_u64(b, 0);
    while (b->len % 32) put(b, "", 1);
    for (int blk = 0; blk < 2; blk++) {
        uint8_t d[2] = {0x00, blk ? 0x3E : 0x38}; /* f16 1.5, 0.5 */
        put(b, d, 2);
        for (int j = 0; j < 32; j++) {
            int8_t q = (int8_t)(j - 16);
            put(b, &q, 1);
        }
    }
}

/* good_file, opened. */
static void good_open(gguf *g) {
    static blob b;
    good_file(&b);
    assert_int_equal(blob_open(g, &b), STATUS_OK);
}

static void test_getters(void **state) {
    (void)state;
    gguf g;
    good_open(&g);
    assert_int_equal(g.version, 3);
    assert_int_equal(g.alignment, GGUF_DEFAULT_ALIGNMENT);
    int64_t i;
    assert_int_equal(gguf_get_int(&g, "x.u8", 0, 255, &i), STATUS_OK);
    assert_int_equal(i, 200);
    assert_int_equal(gguf_get_int(&g, "x.i16", -10, 10, &i), STATUS_OK);
    assert_int_equal(i, -2);
    expect_get_error(gguf_get_int(&g, "x.u32", 0, 100, &i),
                     "mem.gguf: key 'x.u32' = 4000000000 is outside [0, 100]");
    expect_get_error(gguf_get_int(&g, "x.u64", 0, INT64_MAX, &i),
                     "key 'x.u64' = 18446744073709551615 is outside");
    expect_get_error(gguf_get_int(&g, "x.f32", 0, 1, &i),
                     "key 'x.f32' has type float32, not an integer");
    expect_get_error(gguf_get_int(&g, "x.nope", 0, 1, &i), "key 'x.nope' is missing");
    double f;
    assert_int_equal(gguf_get_float(&g, "x.f32", &f), STATUS_OK);
    assert_true(f == 1.5);
    int flag;
    assert_int_equal(gguf_get_bool(&g, "x.flag", &flag), STATUS_OK);
    assert_int_equal(flag, 1);
    const char *s;
    expect_get_error(gguf_get_string(&g, "x.words", &s),
                     "key 'x.words' has type array of string, not string");
    const gguf_kv *kv;
    assert_int_equal(gguf_get_array(&g, "x.words", GGUF_TYPE_STRING, &kv), STATUS_OK);
    assert_int_equal(kv->n, 2);
    uint64_t len;
    assert_string_equal(gguf_kv_str(kv, 0, &len), "alpha");
    assert_int_equal(len, 5);
    assert_int_equal(gguf_kv_str(kv, 1, &len)[0], '\0');
    assert_int_equal(len, 0);
    expect_get_error(gguf_get_array(&g, "x.words", GGUF_TYPE_INT32, &kv),
                     "not array of int32");
    assert_int_equal(gguf_get_array(&g, "x.empty", GGUF_TYPE_COUNT, &kv), STATUS_OK);
    assert_int_equal(kv->n, 0);
    gguf_close(&g);
}

static void test_tensor_read(void **state) {
    (void)state;
    gguf g;
    good_open(&g);
    const gguf_tensor *t = gguf_tensor_find(&g, "w");
    assert_non_null(t);
    assert_null(gguf_tensor_find(&g, "v"));
    assert_int_equal(t->elems, 64);
    assert_int_equal(t->bytes, 68);
    float out[64];
    assert_int_equal(gguf_tensor_read_f32(&g, t, out), STATUS_OK);
    for (int j = 0; j < 64; j++)
        assert_true(out[j] == (float)(j % 32 - 16) * (j < 32 ? 0.5f : 1.5f));
    gguf_close(&g);
}

/* A file that shrinks after it was opened: the tensor read says so instead of reading junk.
 * The tensor (32 KB of F32) is larger than stdio's buffer, so the cut is really read. */
static void test_truncated_after_open(void **state) {
    (void)state;
    static blob b;
    head(&b, 3, 1, 0);
    put_str(&b, "w");
    put_u32(&b, 1);
    put_u64(&b, 8192);
    put_u32(&b, GGML_TYPE_F32);
    put_u64(&b, 0);
    while (b.len % 32) put(&b, "", 1);
    for (int j = 0; j < 8192; j++) put_u32(&b, 0x3F800000u);
    char path[] = "/tmp/test_gguf.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b.buf, b.len), (ssize_t)b.len);
    gguf g;
    assert_int_equal(gguf_open(&g, path), STATUS_OK);
    assert_int_equal(ftruncate(fd, (off_t)(b.len - 10)), 0);
    static float out[8192];
    expect_get_error(gguf_tensor_read_f32(&g, gguf_tensor_find(&g, "w"), out),
                     "tensor 'w': cannot read 32768 bytes at offset");
    gguf_close(&g);
    close(fd);
    unlink(path);
}

static void test_refusals(void **state) {
    (void)state;
    blob b;
    head(&b, 0x03000000u, 0, 0);
    expect_refused(&b, "GGUF version 3 big-endian is not supported");
    head(&b, 4, 0, 0);
    expect_refused(&b, "GGUF version 4 is not supported (tripar reads versions 2 and 3)");
    head(&b, 3, 0, 2);
    kv_u32(&b, "a", GGUF_TYPE_UINT8, 1);
    kv_u32(&b, "a", GGUF_TYPE_UINT8, 2);
    expect_refused(&b, "key 'a' appears twice");
    head(&b, 3, 0, 1);
    kv_u32(&b, "b", GGUF_TYPE_BOOL, 2);
    expect_refused(&b, "key 'b': bool value 2 is neither 0 nor 1");
    head(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", GGUF_TYPE_INT32, 64);
    expect_refused(&b, "key 'general.alignment' has type int32, not uint32");
    head(&b, 3, 0, 1);
    put_str(&b, "s");
    put_u32(&b, GGUF_TYPE_ARRAY);
    put_u32(&b, GGUF_TYPE_UINT64);
    put_u64(&b, 1000);
    expect_refused(&b, "key 's': 1000 values of type uint64 run past the end of the file");
    for (uint32_t n_dims = 0; n_dims <= 5; n_dims += 5) {
        head(&b, 3, 1, 0);
        put_str(&b, "t");
        put_u32(&b, n_dims);
        for (uint32_t d = 0; d < n_dims; d++) put_u64(&b, 1);
        put_u32(&b, GGML_TYPE_F32);
        put_u64(&b, 0);
        for (int pad = 0; pad < 16; pad++) put(&b, "", 1); /* as the tensor count bound wants */
        char want[64];
        snprintf(want, sizeof want, "tensor 't': n_dims = %u (tripar reads 1 to 4)", n_dims);
        expect_refused(&b, want);
    }
    head(&b, 3, 2, 0);
    for (int t = 0; t < 2; t++) {
        put_str(&b, "same");
        put_u32(&b, 1);
        put_u64(&b, 1);
        put_u32(&b, GGML_TYPE_F32);
        put_u64(&b, 0);
    }
    expect_refused(&b, "tensor 'same' appears twice");
}

static void test_type_table(void **state) {
    (void)state;
    static const struct {
        uint32_t id;
        const char *name;
        uint32_t elems, bytes;
    } want[] = {{0, "F32", 1, 4},     {1, "F16", 1, 2},     {30, "BF16", 1, 2},
                {8, "Q8_0", 32, 34},  {2, "Q4_0", 32, 18},  {3, "Q4_1", 32, 20},
                {6, "Q5_0", 32, 22},  {7, "Q5_1", 32, 24},  {10, "Q2_K", 256, 84},
                {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
                {14, "Q6_K", 256, 210}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const gguf_qtype *q = gguf_qtype_get(want[i].id);
        assert_non_null(q);
        assert_string_equal(q->name, want[i].name);
        assert_int_equal(q->block_elems, want[i].elems);
        assert_int_equal(q->block_bytes, want[i].bytes);
    }
    assert_null(gguf_qtype_get(9));  /* Q8_1: not in GGUF model files */
    assert_null(gguf_qtype_get(16)); /* IQ2_XXS */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_tensor_read),
        cmocka_unit_test(test_truncated_after_open),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_type_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
