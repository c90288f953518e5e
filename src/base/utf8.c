/* UTF-8 decoding of one character (utf8.h). */
#include "base/utf8.h"

long utf8_decode(const unsigned char *s, size_t n, size_t *len) {
    size_t l = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
             : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (l == 0 || l > n) return -1;
    long cp = l == 1 ? s[0] : s[0] & (0x7F >> l);
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *len = l;
    return cp;
}
