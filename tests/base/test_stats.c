/* stats_percentile against values numpy.percentile gives for the same samples. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/stats.h"

static void test_percentile_matches_numpy(void **state) {
    (void)state;
    /* numpy.percentile([1, 2, 3, 4], q) for q = 0, 50, 90, 99, 100 */
    double four[] = {1, 2, 3, 4};
    assert_float_equal(stats_percentile(four, 4, 0), 1.0, 1e-12);
    assert_float_equal(stats_percentile(four, 4, 50), 2.5, 1e-12);
    assert_float_equal(stats_percentile(four, 4, 90), 3.7, 1e-12);
    assert_float_equal(stats_percentile(four, 4, 99), 3.97, 1e-12);
    assert_float_equal(stats_percentile(four, 4, 100), 4.0, 1e-12);
    /* numpy.percentile([0.5, 0.7, 1.5, 10, 20], [25, 75, 99]) = 0.7, 10.0, 19.6 */
    double five[] = {20, 0.5, 10, 0.7, 1.5};
    stats_sort(five, 5);
    assert_float_equal(five[0], 0.5, 0);
    assert_float_equal(five[4], 20, 0);
    assert_float_equal(stats_percentile(five, 5, 25), 0.7, 1e-12);
    assert_float_equal(stats_percentile(five, 5, 75), 10.0, 1e-12);
    assert_float_equal(stats_percentile(five, 5, 99), 19.6, 1e-12);
    double one[] = {7};
    assert_float_equal(stats_percentile(one, 1, 90), 7, 0);
    assert_true(isnan(stats_percentile(one, 0, 50)));
    assert_float_equal(stats_mean(five, 5), 6.54, 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_percentile_matches_numpy)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
