/* The input section of a job: one prompt source (input.tokens, tokens_file, text, text_file or
 * synthetic) resolved to batch prompts of prompt_len tokens, or to a text for the tokenizer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/check.h"
#include "base/hash.h"
#include "base/path.h"
#include "job/job.h"
#include "job/job_internal.h"
#include "job/job_tree.h"

static const char *const UNEQUAL = "prompts of unequal length are refused; pad them yourself";

static int job_read_tokens(job_loader *L, const jnode *v) {
    job *j = L->j;
    char buf[128];
    if (v->type != JNODE_SEQ || v->n == 0)
        return jnode_fail(v,
                          "input.tokens: expected a sequence of token ids (one prompt) or a "
                          "sequence of such sequences (a batch), got %s",
                          v->type == JNODE_SEQ ? "an empty sequence"
                                               : jnode_describe(v, buf, sizeof buf));
    int batched = v->items[0]->type == JNODE_SEQ;
    int batch = batched ? v->n : 1;
    int len = batched ? v->items[0]->n : v->n;
    for (int b = 0; b < batch; b++) {
        const jnode *p = batched ? v->items[b] : v;
        if (p->type != JNODE_SEQ)
            return jnode_fail(p, "input.tokens: prompt %d is %s; give all prompts as sequences", b,
                              jnode_describe(p, buf, sizeof buf));
        if (p->n == 0) return jnode_fail(p, "input.tokens: prompt %d is empty", b);
        if (p->n != len)
            return jnode_fail(p, "input.tokens: prompt %d has %d tokens but prompt 0 has %d; %s", b,
                              p->n, len, UNEQUAL);
    }
    if ((long)batch * len > CAP_TOKENS)
        return jnode_fail(v, "input.tokens: more than %ld tokens", CAP_TOKENS);
    j->tokens = xmalloc((unsigned long)batch * (unsigned long)len * sizeof *j->tokens);
    j->batch = batch, j->prompt_len = len;
    for (int b = 0; b < batch; b++) {
        const jnode *p = batched ? v->items[b] : v;
        for (int t = 0; t < len; t++) {
            char name[96];
            snprintf(name, sizeof name, "input.tokens: prompt %d position %d", b, t);
            long x = 0;
            TRY(job_parse_long(p->items[t], name, 0, INT32_MAX, &x));
            j->tokens[(size_t)b * len + t] = (int32_t)x;
        }
    }
    return STATUS_OK;
}

/* Up to 40 bytes of s, up to the first of stop, into out for a message: printable ASCII as
 * it is, every other byte as \xHH, so a binary file never puts raw bytes on a terminal. */
static void job_escape(const char *s, const char *stop, char *out, size_t size) {
    size_t n = 0;
    for (int i = 0; s[i] && !strchr(stop, s[i]) && n + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 40) {
            n += (size_t)snprintf(out + n, size - n, "...");
            break;
        }
        if (c >= 0x20 && c < 0x7F && c != '\\')
            out[n++] = (char)c;
        else
            n += (size_t)snprintf(out + n, size - n, "\\x%02X", c);
    }
    out[n] = '\0';
}

/* One prompt per line, whitespace-separated ids; blank lines and lines starting with '#' are
 * skipped. Errors point at the tokens file's own line; a path that is not a regular file is
 * refused at the key v before it is opened (a FIFO would block, a directory reads as empty). */
static int job_read_tokens_file(job *j, const jnode *v, const char *path) {
    char why[PATH_WHY_MAX];
    if (path_check_input(path, why, sizeof why) != 0)
        return jnode_fail(v, "input.tokens_file: '%s' %s; give a text file of token ids", path,
                          why);
    FILE *f = fopen(path, "r");
    if (!f) {
        error_set("%s: cannot open tokens file: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    char *line = NULL;
    size_t cap = 0, count = 0, alloc = 0;
    int line_no = 0, first_line = 0, rc = STATUS_OK;
    int32_t *tokens = NULL;
    j->batch = 0, j->prompt_len = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) >= 0) {
        line_no++;
        const char *nul = memchr(line, '\0', (size_t)got);
        if (nul) { /* it would end the line for strtoll: the ids after it would vanish */
            error_set("%s:%d: a NUL byte at column %d; a tokens file is text, one prompt of "
                      "token ids per line",
                      path, line_no, (int)(nul - line) + 1);
            rc = STATUS_BAD_INPUT;
            goto done;
        }
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\n' || *s == '\r' || *s == '\0' || *s == '#') continue;
        int n = 0;
        for (;;) {
            while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
                s++;
            if (!*s) break;
            errno = 0;
            char *end = NULL;
            long long x = strtoll(s, &end, 10);
            if (end == s || (*end && !strchr(" \t\r\n", *end)) || errno || x < 0 || x > INT32_MAX) {
                char shown[256];
                job_escape(s, " \t\r\n", shown, sizeof shown);
                error_set("%s:%d: '%s' is not a token id (an integer from 0 to %d)", path, line_no,
                          shown, INT32_MAX);
                rc = STATUS_BAD_INPUT;
                goto done;
            }
            if (count == alloc) {
                alloc = alloc ? 2 * alloc : 1024;
                if (alloc > (size_t)CAP_TOKENS) {
                    error_set("%s:%d: more than %ld tokens", path, line_no, CAP_TOKENS);
                    rc = STATUS_BAD_INPUT;
                    goto done;
                }
                int32_t *grown = realloc(tokens, alloc * sizeof *tokens);
                CHECK(grown, "out of memory reading %s", path);
                tokens = grown;
            }
            tokens[count++] = (int32_t)x;
            n++;
            s = end;
        }
        if (j->batch == 0) j->prompt_len = n, first_line = line_no;
        if (n != j->prompt_len) {
            error_set("%s:%d: prompt %d has %d tokens but prompt 0 (line %d) has %d; %s", path,
                      line_no, j->batch, n, first_line, j->prompt_len, UNEQUAL);
            rc = STATUS_BAD_INPUT;
            goto done;
        }
        j->batch++;
    }
    if (j->batch == 0) {
        error_set("%s: the tokens file holds no prompts", path);
        rc = STATUS_BAD_INPUT;
    }
done:
    free(line);
    fclose(f);
    if (rc) {
        free(tokens);
        j->batch = j->prompt_len = 0;
        return rc;
    }
    j->tokens = tokens;
    return STATUS_OK;
}

/* The whole of input.text_file as one prompt. Errors point at the key (file:line, or the --set
 * that gave it): a file that is not a regular one (a directory, a FIFO) or is empty is refused
 * here rather than turning into a confusing tokenizer error later. */
static int job_read_text_file(job *j, const jnode *v, const char *path) {
    char kind[PATH_WHY_MAX]; /* before opening: opening a FIFO would wait for a writer */
    if (path_check_input(path, kind, sizeof kind) != 0)
        return jnode_fail(v, "input.text_file: '%s' %s; give a file of UTF-8 text", path, kind);
    FILE *f = fopen(path, "rb");
    if (!f) return jnode_fail(v, "input.text_file: cannot open '%s': %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *text = xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            if (cap > (size_t)CAP_TEXT) {
                free(text);
                fclose(f);
                return jnode_fail(v, "input.text_file: '%s' is larger than %ld bytes", path,
                                  CAP_TEXT);
            }
            char *grown = realloc(text, cap);
            CHECK(grown, "out of memory reading %s", path);
            text = grown;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    int read_error = ferror(f);
    fclose(f);
    text[len] = '\0';
    const char *why = read_error            ? "could not be read"
                      : len == 0            ? "is empty; give the prompt's text"
                      : strlen(text) != len ? "holds a NUL byte; give UTF-8 text"
                                            : NULL;
    size_t bad = 0;
    if (!why && jtree_utf8_check(text, &bad) != 0) { /* the resolved job must hold it as YAML */
        int line = 1;
        for (size_t i = 0; i < bad; i++)
            line += text[i] == '\n';
        unsigned byte = (unsigned char)text[bad];
        free(text);
        return jnode_fail(v,
                          "input.text_file: '%s' is not UTF-8 text: line %d has the bad byte "
                          "0x%02X (offset %zu)",
                          path, line, byte, bad);
    }
    if (why) {
        free(text);
        return jnode_fail(v, "input.text_file: '%s' %s", path, why);
    }
    j->text = text;
    return STATUS_OK;
}

int job_walk_input(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    TRY(job_section_check(m, m_key, "input", JOB_INPUT_ALL_KEYS));
    const char *given = NULL;
    const jnode *given_key = NULL;
    char list[128];
    job_names_join(JOB_INPUT_KEYS, list, sizeof list);
    for (int i = 0; JOB_INPUT_KEYS[i]; i++) {
        const jnode *k = NULL;
        if (!jnode_get(m, JOB_INPUT_KEYS[i], &k)) continue;
        if (given)
            return jnode_fail(k, "input: give exactly one of %s; got both '%s' and '%s'", list,
                              given, JOB_INPUT_KEYS[i]);
        given = JOB_INPUT_KEYS[i], given_key = k;
    }
    if (!given) {
        if (m_key) return jnode_fail(m_key, "input: give exactly one of %s", list);
        error_set("%s: missing section 'input'; give exactly one of input.%s", j->source,
                  "tokens, input.tokens_file, input.text, input.text_file, input.synthetic");
        return STATUS_BAD_INPUT;
    }
    (void)given_key;
    j->chat = 0;
    TRY(job_get_bool(L, m, "input", "chat", &j->chat));
    const jnode *chat_key = NULL;
    if (j->chat && strcmp(given, "text") != 0 && strcmp(given, "text_file") != 0 &&
        jnode_get(m, "chat", &chat_key))
        return jnode_fail(chat_key, "input.chat: true renders text through the model's chat "
                                    "template, so it needs input.text or input.text_file, not "
                                    "input.%s", given);
    const jnode *v = job_field(L, m, "input", given, NULL);
    if (!strcmp(given, "tokens")) return job_read_tokens(L, v);
    if (!strcmp(given, "tokens_file")) {
        TRY(job_get_path(L, m, "input", "tokens_file", j->tokens_file));
        return job_read_tokens_file(j, v, j->tokens_file);
    }
    if (!strcmp(given, "text")) {
        char buf[128];
        if (v->type != JNODE_SCALAR || !v->value[0])
            return jnode_fail(v, "input.text: expected a non-empty string, got %s",
                              jnode_describe(v, buf, sizeof buf));
        j->text = strdup(v->value);
        CHECK(j->text, "out of memory");
        return STATUS_OK;
    }
    if (!strcmp(given, "text_file")) {
        TRY(job_get_path(L, m, "input", "text_file", j->text_file));
        return job_read_text_file(j, v, j->text_file);
    }
    const jnode *syn_key = NULL;
    jnode_get(m, "synthetic", &syn_key);
    TRY(job_section_check(v, syn_key, "input.synthetic", JOB_INPUT_SYNTHETIC_KEYS));
    j->synthetic_input = 1, j->batch = 1, j->prompt_len = 16, j->input_seed = 42;
    TRY(job_get_int(L, v, "input.synthetic", "batch", 1, CAP_DIM, &j->batch));
    TRY(job_get_int(L, v, "input.synthetic", "length", 1, CAP_DIM, &j->prompt_len));
    TRY(job_get_u64(L, v, "input.synthetic", "seed", &j->input_seed));
    if ((long)j->batch * j->prompt_len > CAP_TOKENS)
        return jnode_fail(syn_key, "input.synthetic: batch * length is more than %ld tokens",
                          CAP_TOKENS);
    return STATUS_OK;
}

void job_fill_synthetic_tokens(job *j, int vocab) {
    CHECK(vocab > 0 && j->batch > 0 && j->prompt_len > 0,
          "job_fill_synthetic_tokens: vocab %d, batch %d, prompt_len %d", vocab, j->batch,
          j->prompt_len);
    size_t n = (size_t)j->batch * (size_t)j->prompt_len;
    free(j->tokens);
    j->tokens = xmalloc(n * sizeof *j->tokens);
    for (size_t i = 0; i < n; i++)
        j->tokens[i] =
            (int32_t)(hash_stream(j->input_seed, i) % (uint64_t)vocab); /* any rank, any token */
}
