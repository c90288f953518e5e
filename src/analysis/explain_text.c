/* The text buffer explain's words are written into (explain.h, explain_text): one printf-like
 * append that truncates at the buffer's end, shared by the verdict and the straggler words. */
#include <stdarg.h>
#include <stdio.h>

#include "analysis/explain.h"

void explain_say(explain_text *t, const char *fmt, ...) {
    if (t->used >= t->len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->out + t->used, t->len - t->used, fmt, ap);
    va_end(ap);
    if (n > 0) t->used += (size_t)n;
}
