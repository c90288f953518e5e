/* safetensors parser: valid files in each dtype, exact F16/BF16 conversion (all 65536 bit
 * patterns against an independent formula), and every malformed case with its message. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/safetensors.h"

/* A safetensors file in memory: 8-byte size (header_size_override when non-zero), header
 * text, then data_len bytes of data. */
typedef struct {
    uint8_t *buf;
    size_t len;
} blob;

static blob blob_make(const char *header, const void *data, size_t data_len,
                      uint64_t header_size_override) {
    size_t hlen = strlen(header);
    blob b;
    b.len = 8 + hlen + data_len;
    b.buf = malloc(b.len);
    uint64_t size = header_size_override ? header_size_override : hlen;
    for (int i = 0; i < 8; i++) b.buf[i] = (uint8_t)(size >> (8 * i));
    memcpy(b.buf + 8, header, hlen);
    if (data_len) memcpy(b.buf + 8 + hlen, data, data_len);
    return b;
}

/* Parses and expects failure with every fragment present in the message. */
static void expect_error(blob b, ...) {
    safetensors_file f;
    char err[512] = "";
    int rc = safetensors_parse(&f, b.buf, b.len, err, sizeof err);
    if (rc == 0) {
        safetensors_free(&f);
        fail_msg("parse succeeded; expected an error");
    }
    va_list ap;
    va_start(ap, b);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        if (!strstr(err, frag)) fail_msg("message '%s' lacks '%s'", err, frag);
    va_end(ap);
    assert_int_equal(f.n_tensors, 0);
    assert_null(f.tensors);
    free(b.buf);
}

static void test_valid_mixed_dtypes(void **state) {
    (void)state;
    /* a: F32 [2] = {1.5, -2}; b: F16 [3] = {1, -2, 65504}; c: BF16 [1,2] = {1, -0.5} */
    uint8_t data[8 + 6 + 4];
    float a[2] = {1.5f, -2.0f};
    memcpy(data, a, 8); /* little-endian host */
    uint16_t h[3] = {0x3C00, 0xC000, 0x7BFF};
    memcpy(data + 8, h, 6);
    uint16_t bf[2] = {0x3F80, 0xBF00};
    memcpy(data + 14, bf, 4);
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"c\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[14,18]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[8,14]},"
                      "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[8,8]}}   ";
    blob b = blob_make(hdr, data, sizeof data, 0);
    safetensors_file f;
    char err[256];
    assert_int_equal(safetensors_parse(&f, b.buf, b.len, err, sizeof err), 0);
    assert_int_equal(f.n_tensors, 4);
    assert_int_equal(f.n_metadata, 1);
    float out[4];
    const safetensors_tensor *t = safetensors_find(&f, "a");
    assert_non_null(t);
    safetensors_tensor_to_f32(t, out);
    assert_true(out[0] == 1.5f && out[1] == -2.0f);
    t = safetensors_find(&f, "b");
    assert_int_equal(t->dtype, SAFETENSORS_F16);
    safetensors_tensor_to_f32(t, out);
    assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == 65504.0f);
    t = safetensors_find(&f, "c");
    assert_int_equal(t->ndims, 2);
    assert_int_equal(safetensors_tensor_elems(t), 2);
    safetensors_tensor_to_f32(t, out);
    assert_true(out[0] == 1.0f && out[1] == -0.5f);
    assert_int_equal(safetensors_tensor_elems(safetensors_find(&f, "empty")), 0);
    assert_null(safetensors_find(&f, "missing"));
    safetensors_free(&f);
    free(b.buf);
}

/* An independent half -> float: sign * mantissa * 2^exponent with libm. */
static float f16_reference(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0x1f) v = mant ? NAN : INFINITY;
    else if (exp == 0) v = ldexpf((float)mant, -24);
    else v = ldexpf((float)(mant + 1024), exp - 25);
    return sign ? -v : v;
}

static void test_f16_bf16_exhaustive(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float got = safetensors_f16_to_f32((uint16_t)h), want = f16_reference((uint16_t)h);
        if (isnan(want)) {
            assert_true(isnan(got));
        } else if (memcmp(&got, &want, sizeof got) != 0) {
            fail_msg("f16 0x%04x: got %g want %g", h, (double)got, (double)want);
        }
        /* bf16 is the top half of a float */
        float b = safetensors_bf16_to_f32((uint16_t)h);
        uint32_t bits;
        memcpy(&bits, &b, sizeof bits);
        assert_int_equal(bits, h << 16);
    }
}

#define F32_ENTRY(name, shape, b, e)                                                         \
    "\"" name "\":{\"dtype\":\"F32\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_header_size_errors(void **state) {
    (void)state;
    uint8_t four[4] = {1, 0, 0, 0};
    blob b = {malloc(4), 4};
    memcpy(b.buf, four, 4);
    expect_error(b, "too short", NULL);
    expect_error(blob_make("{}", NULL, 0, 0xFFFFFFFFFFull), "absurd", NULL);
    expect_error(blob_make("{}", NULL, 0, 3), "past the end", NULL);
    uint8_t zero[8] = {0};
    b.buf = malloc(8);
    b.len = 8;
    memcpy(b.buf, zero, 8);
    expect_error(b, "header size is 0", NULL);
    /* the header size must not be trusted for the JSON either */
    expect_error(blob_make("{\"a\":1}", NULL, 0, 4), "not valid JSON", NULL);
    expect_error(blob_make("[1,2]", NULL, 0, 0), "not a JSON object", NULL);
    expect_error(blob_make("{\"a\":{}, \"a\":{}}", NULL, 0, 0), "not valid JSON", NULL);
}

static void test_entry_errors(void **state) {
    (void)state;
    uint8_t data[32] = {0};
    expect_error(blob_make("{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}",
                           data, 16, 0),
                 "tensor 'w'", "unsupported dtype 'F64'", NULL);
    expect_error(blob_make("{" F32_ENTRY("w", "[4]", 0, 16) "," F32_ENTRY("far", "[4]", 16, 48)
                           "}", data, 32, 0),
                 "tensor 'far'", "outside the data section", NULL);
    expect_error(blob_make("{" F32_ENTRY("w", "[4]", 8, 4) "}", data, 32, 0),
                 "tensor 'w'", "outside", NULL);
    expect_error(blob_make("{" F32_ENTRY("w", "[4]", 0, 16) "," F32_ENTRY("v", "[4]", 8, 24)
                           "}", data, 32, 0),
                 "overlap", "'w'", "'v'", NULL);
    expect_error(blob_make("{" F32_ENTRY("w", "[3]", 0, 16) "}", data, 32, 0),
                 "tensor 'w'", "16 bytes", "need 12", NULL);
    /* prod(shape) overflows 64 bits: an error, not a wrap-around that matches the bytes */
    expect_error(blob_make("{" F32_ENTRY("big", "[4611686018427387904,4]", 0, 16) "}", data,
                           32, 0),
                 "tensor 'big'", "need more than", NULL);
    expect_error(blob_make("{" F32_ENTRY("neg", "[-4]", 0, 16) "}", data, 32, 0),
                 "tensor 'neg'", "shape[0]", NULL);
    expect_error(blob_make("{\"w\":{\"dtype\":\"F32\",\"shape\":[4]}}", data, 32, 0),
                 "tensor 'w'", "data_offsets", NULL);
    expect_error(blob_make("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0]}}",
                           data, 32, 0),
                 "tensor 'w'", "[begin, end]", NULL);
    expect_error(blob_make("{\"w\":[1]}", data, 32, 0), "tensor 'w'", "not a JSON object",
                 NULL);
    expect_error(blob_make("{\"__metadata__\":[]}", data, 32, 0), "__metadata__", NULL);
    expect_error(blob_make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                           "\"data_offsets\":[0,4]}}", data, 32, 0),
                 "tensor 'w'", "dimensions", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_mixed_dtypes),
        cmocka_unit_test(test_f16_bf16_exhaustive),
        cmocka_unit_test(test_header_size_errors),
        cmocka_unit_test(test_entry_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
