/* UTF-8 decoding of one character, for the code that must tell characters apart in bytes (the
 * tokenizer's whitespace around added tokens, the chat template's strip). */
#pragma once
#include <stddef.h>

/* Code point of the valid UTF-8 character at s[0..n), with its length in *len; -1 if invalid
 * (a bad lead or continuation byte, or fewer than its bytes left). */
long utf8_decode(const unsigned char *s, size_t n, size_t *len);
