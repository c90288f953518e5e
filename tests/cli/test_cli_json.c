/* The JSON writer of every tripar output (src/cli/cli_json.c): reals at the fewest of 15, 16 or
 * 17 significant digits that read back exactly, integers, strings that look like numbers and
 * non-finite values left as they were, and every real of a document reading back as itself. */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/check.h"
#include "cli/cli.h"

static void expect_text(double v, const char *want) {
    char buf[40];
    assert_true(cli_json_real_text(v, buf, sizeof buf) > 0);
    if (strcmp(buf, want) != 0) fail_msg("%.17g printed as '%s', expected '%s'", v, buf, want);
}

static void test_shortest(void **state) {
    (void)state;
    expect_text(3e-6, "3e-6");           /* jansson alone: 3.0000000000000001e-6 */
    expect_text(0.1, "0.1");             /* jansson alone: 0.10000000000000001 */
    expect_text(1.0 / 3.0, "0.3333333333333333"); /* 16 digits */
    expect_text(2.0 / 3.0, "0.6666666666666666");
    expect_text(0.1 + 0.2, "0.30000000000000004");
    expect_text(1e300, "1e300");
    expect_text(-1e-300, "-1e-300");
    expect_text(1e22, "1e22");
    expect_text(5e-324, "5e-324"); /* the smallest denormal; %.15g: 4.94065645841247e-324 */
    expect_text(-2.5e-310, "-2.5e-310"); /* a denormal; %.15g: -2.50000000000002e-310 */
    expect_text(DBL_MIN, "2.2250738585072014e-308");
    expect_text(DBL_MAX, "1.7976931348623157e308");
    expect_text(1.0, "1.0"); /* a real stays a real */
    expect_text(100.0, "100.0");
    expect_text(0.0, "0.0");
    expect_text(-0.0, "-0.0");
    expect_text(1e15, "1e15");
    expect_text(123456.78900000001, "123456.789");
    char buf[40];
    assert_int_equal(cli_json_real_text(NAN, buf, sizeof buf), -1);
    assert_int_equal(cli_json_real_text(INFINITY, buf, sizeof buf), -1);
}

/* Significant digits of a printed number: its mantissa's, less leading and trailing zeros. */
static int significant(const char *s) {
    char digits[40];
    int n = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && (n > 0 || *s != '0')) digits[n++] = *s;
    while (n > 0 && digits[n - 1] == '0')
        n--;
    return n;
}

/* Finite doubles drawn from their bits (every other one a denormal, whose precision is short):
 * the text reads back as the same double, and no %g of fewer significant digits would have. */
static void test_round_trip(void **state) {
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15u;
    int n = 0;
    while (n < 40000) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const uint64_t bits = n % 2 ? x & 0x800FFFFFFFFFFFFFu : x; /* odd draws: exponent 0 */
        double v;
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v)) continue;
        n++;
        char buf[40], shorter[400]; /* 400: what gcc reckons %.*g may take */
        assert_true(cli_json_real_text(v, buf, sizeof buf) > 0);
        const double back = strtod(buf, NULL);
        if (memcmp(&back, &v, sizeof v) != 0)
            fail_msg("%.17g printed as %s reads back as %.17g", v, buf, back);
        for (int d = 1; d < significant(buf); d++) {
            snprintf(shorter, sizeof shorter, "%.*g", d, v);
            if (strtod(shorter, NULL) == v)
                fail_msg("%.17g printed as %s; %s is shorter", v, buf, shorter);
        }
    }
}

/* A document through cli_json_write: reals reprinted, strings and integers as they were, the
 * non-finite as null; and it parses back with every real unchanged. */
static void test_document(void **state) {
    (void)state;
    json_t *root = json_object(), *list = json_array();
    json_object_set_new(root, "alpha_s", json_real(3e-6));
    json_object_set_new(root, "0.1", json_string("2.5000000000000001")); /* number-like key, value */
    json_object_set_new(root, "quoted", json_string("say \"1.5\" twice"));
    json_object_set_new(root, "count", json_integer(12345678901234));
    json_object_set_new(root, "missing", cli_json_number(NAN));
    json_object_set_new(root, "infinite", cli_json_number(-INFINITY));
    const double values[] = {0.1, 1.0 / 3.0, 1e300, 5e-324, -2.5e-310, 6.02214076e23, 42.0};
    const int n = (int)(sizeof values / sizeof values[0]);
    for (int i = 0; i < n; i++)
        json_array_append_new(list, cli_json_number(values[i]));
    json_object_set_new(root, "values", list);
    json_t *copy = json_deep_copy(root);

    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    assert_int_equal(cli_json_write(root, NULL, f, JSON_INDENT(1)), STATUS_OK);
    fclose(f);
    const char *want[] = {"\"alpha_s\": 3e-6,", "\"0.1\": \"2.5000000000000001\"",
                          "\"say \\\"1.5\\\" twice\"", "\"count\": 12345678901234",
                          "\"missing\": null", "\"infinite\": null", " 0.1,",
                          " 0.3333333333333333,", " 1e300,", " 42.0\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(text, want[i])) fail_msg("'%s' not in:\n%s", want[i], text);
    assert_null(strstr(text, "3.0000000000000001")); /* jansson's own 17 digits */
    assert_null(strstr(text, "0.10000000000000001"));
    assert_int_equal(text[size - 1], '\n');

    json_error_t err;
    json_t *back = json_loads(text, 0, &err);
    assert_non_null(back);
    assert_true(json_equal(back, copy)); /* reals compare by value: every one read back exactly */
    json_t *again = json_object_get(back, "values");
    for (int i = 0; i < n; i++) {
        const double v = json_real_value(json_array_get(again, (size_t)i));
        assert_memory_equal(&v, &values[i], sizeof v);
    }
    json_decref(back);
    json_decref(copy);
    free(text);
}

/* To a file, and a file that cannot be written: the error names it. */
static void test_file(void **state) {
    (void)state;
    char path[] = "/tmp/tripar-json-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    json_t *root = json_pack("{s:f}", "tpot_s", 0.1);
    assert_int_equal(cli_json_write(root, path, NULL, JSON_COMPACT), STATUS_OK);
    char buf[64] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    remove(path);
    assert_string_equal(buf, "{\"tpot_s\":0.1}");
    assert_int_equal(cli_json_write(json_object(), "/nonexistent-dir/x.json", NULL, 0),
                     STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "/nonexistent-dir/x.json: cannot write"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortest),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_document),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
