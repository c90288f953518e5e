/* Integer arithmetic shared by the layers that split tensors and meshes. */
#pragma once

/* Greatest common divisor of two non-negative ints; gcd(a, 0) = a. */
static inline int int_gcd(int a, int b) {
    while (b) {
        const int t = a % b;
        a = b;
        b = t;
    }
    return a;
}
