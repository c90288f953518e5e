/* The chat-template recogniser of input.chat (chat.h). The template's text is read as Jinja's
 * lexer reads it only as far as this needs: the string literals inside {{ }} and {% %} tags
 * (unescaped as Jinja does), whether the tags name bos_token, and whether they trim the
 * message. A family is recognised by the literals that write its markers; the one user turn is
 * then written in that family's format with the template's own literals where they differ
 * between models (ChatML's default system turn, [INST]'s spacing). */
#include "io/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/utf8.h"

const char *chat_family_name(chat_family f) {
    static const char *const names[] = {"ChatML", "Llama 3", "Llama 2/Mistral [INST]"};
    return f >= CHAT_CHATML && f <= CHAT_INST ? names[f] : "?";
}

#define CHAT_FAMILIES "ChatML (SmolLM2, Qwen2), Llama 3, Llama 2/Mistral [INST]"

/* What the recogniser read from a template. */
typedef struct {
    char **lit; /* the string literals of the tags, unescaped, in order */
    int n, cap;
    int names_bos;  /* a tag names bos_token */
    int trims;      /* a tag applies trim or .strip(): the message is stripped */
    int raw_text;   /* text outside the tags that is not whitespace */
} chat_scan;

static void scan_free(chat_scan *s) {
    for (int i = 0; i < s->n; i++) free(s->lit[i]);
    free(s->lit);
}

static void scan_push(chat_scan *s, char *lit) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        char **grown = realloc(s->lit, (size_t)s->cap * sizeof *grown);
        CHECK(grown, "out of memory reading a chat template");
        s->lit = grown;
    }
    s->lit[s->n++] = lit;
}

/* The literal at t[0] (a quote) up to its closing quote, unescaped as Jinja's lexer does
 * (Python's escapes; the ones templates use). Returns the length read, quotes included, or 0
 * when it never closes. */
static size_t literal_read(const char *t, chat_scan *s) {
    const char q = t[0];
    size_t i = 1, o = 0;
    char *out = xmalloc(strlen(t) + 1);
    for (; t[i] && t[i] != q; i++) {
        if (t[i] != '\\' || !t[i + 1]) {
            out[o++] = t[i];
            continue;
        }
        char e = t[++i];
        out[o++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    }
    out[o] = '\0';
    if (!t[i]) {
        free(out);
        return 0;
    }
    scan_push(s, out);
    return i + 1;
}

static int word_at(const char *t, size_t i, size_t n, const char *word) {
    size_t l = strlen(word);
    return i + l <= n && !strncmp(t + i, word, l);
}

/* Reads the tags of tmpl. Returns 0, or -1 when a tag or literal never closes. */
static int scan_template(const char *tmpl, chat_scan *s) {
    memset(s, 0, sizeof *s);
    const size_t n = strlen(tmpl);
    size_t i = 0;
    while (i < n) {
        if (tmpl[i] != '{' || (tmpl[i + 1] != '{' && tmpl[i + 1] != '%' && tmpl[i + 1] != '#')) {
            if (!strchr(" \t\r\n", tmpl[i])) s->raw_text = 1;
            i++;
            continue;
        }
        const char open = tmpl[i + 1], close = open == '{' ? '}' : open;
        i += 2;
        if (open == '#') { /* a comment renders nothing */
            const char *end = strstr(tmpl + i, "#}");
            if (!end) return -1;
            i = (size_t)(end - tmpl) + 2;
            continue;
        }
        for (;;) {
            if (i >= n) return -1;
            if (tmpl[i] == close && tmpl[i + 1] == '}') {
                i += 2;
                break;
            }
            if (tmpl[i] == '\'' || tmpl[i] == '"') {
                size_t used = literal_read(tmpl + i, s);
                if (!used) return -1;
                i += used;
                continue;
            }
            if (word_at(tmpl, i, n, "bos_token")) s->names_bos = 1;
            if (word_at(tmpl, i, n, "trim") || word_at(tmpl, i, n, "strip(")) s->trims = 1;
            i++;
        }
    }
    return 0;
}

static int starts_with(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static int ends_with(const char *s, const char *p) {
    size_t ls = strlen(s), lp = strlen(p);
    return ls >= lp && !strcmp(s + ls - lp, p);
}

/* The first literal containing `part`, or NULL. */
static const char *lit_containing(const chat_scan *s, const char *part) {
    for (int i = 0; i < s->n; i++)
        if (strstr(s->lit[i], part)) return s->lit[i];
    return NULL;
}

/* ---- Python's str.strip(), which Jinja's trim and .strip() run --------------------------- */

/* Python's str.isspace: Unicode White_Space plus the separators U+001C..U+001F. */
static int py_space(long c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* s[*begin, *end) without the leading and trailing whitespace characters. */
static void py_strip(const char *s, size_t *begin, size_t *end) {
    const unsigned char *u = (const unsigned char *)s;
    size_t b = 0, e = strlen(s), len;
    while (b < e) {
        long c = utf8_decode(u + b, e - b, &len);
        if (c < 0 || !py_space(c)) break;
        b += len;
    }
    size_t last_end = b; /* end of the last character that is not whitespace */
    for (size_t i = b; i < e;) {
        long c = utf8_decode(u + i, e - i, &len);
        if (c < 0) len = 1;
        i += len;
        if (c < 0 || !py_space(c)) last_end = i;
    }
    *begin = b;
    *end = last_end;
}

/* ---- rendering ---------------------------------------------------------------------------- */

static char *concat(const char *const *parts, int n) {
    size_t total = 1;
    for (int i = 0; i < n; i++) total += strlen(parts[i]);
    char *out = xmalloc(total);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(parts[i]);
        memcpy(out + o, parts[i], l);
        o += l;
    }
    out[o] = '\0';
    return out;
}

/* The template's first characters with newlines and quotes escaped, for messages. */
static void template_head(const char *tmpl, char *buf, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; tmpl[i] && i < 80 && o + 4 < cap; i++) {
        char c = tmpl[i];
        if (c == '\n' || c == '"' || c == '\\') {
            buf[o++] = '\\';
            c = c == '\n' ? 'n' : c;
        }
        buf[o++] = c;
    }
    buf[o] = '\0';
    if (strlen(tmpl) > 80 && o + 4 < cap) strcat(buf, "...");
}

/* Which family, and the pieces that differ between its models; a reason when none fits. */
typedef struct {
    chat_family family;
    const char *system;  /* ChatML: the default system turn, "" when the template has none */
    const char *open, *close; /* [INST]: the literals around the message */
} chat_form;

static const char *recognise(const chat_scan *s, chat_form *f) {
    static const char *const GEN_CHATML = "<|im_start|>assistant\n";
    static const char *const GEN_LLAMA3 = "<|start_header_id|>assistant<|end_header_id|>\n\n";
    if (s->raw_text) return "it writes text outside its tags";
    memset(f, 0, sizeof *f);
    if (lit_containing(s, "<|im_start|>")) {
        f->family = CHAT_CHATML;
        if (!lit_containing(s, "<|im_end|>") || !lit_containing(s, GEN_CHATML))
            return "a ChatML template without <|im_end|> or the generation prompt "
                   "<|im_start|>assistant\\n";
        f->system = "";
        for (int i = 0; i < s->n; i++) { /* a whole system turn in one literal is the default */
            const char *l = s->lit[i];
            if (starts_with(l, "<|im_start|>system\n") && ends_with(l, "<|im_end|>\n") &&
                strlen(l) > strlen("<|im_start|>system\n<|im_end|>\n")) {
                f->system = l;
                break;
            }
        }
        return NULL;
    }
    if (lit_containing(s, "<|start_header_id|>")) {
        f->family = CHAT_LLAMA3;
        if (!lit_containing(s, "<|eot_id|>") || !lit_containing(s, GEN_LLAMA3))
            return "a Llama 3 template without <|eot_id|> or the generation prompt "
                   "<|start_header_id|>assistant<|end_header_id|>\\n\\n";
        if (lit_containing(s, "<|start_header_id|>system"))
            return "a Llama 3 template that writes a system turn of its own (Llama 3.1's "
                   "\"Cutting Knowledge Date\" one), which tripar does not render";
        return NULL;
    }
    for (int i = 0; i < s->n; i++) {
        if (!f->open && starts_with(s->lit[i], "[INST]")) f->open = s->lit[i];
        if (!f->close && ends_with(s->lit[i], "[/INST]")) f->close = s->lit[i];
    }
    if (f->open && f->close) {
        f->family = CHAT_INST;
        return NULL;
    }
    return "";
}

int chat_render(const char *tmpl, const char *bos_text, const char *user, const char *where,
                chat_family *family, char **out) {
    *out = NULL;
    chat_scan s;
    chat_form f;
    char head[128];
    template_head(tmpl, head, sizeof head);
    const char *why = scan_template(tmpl, &s) != 0 ? "a tag or string that never closes"
                                                   : recognise(&s, &f);
    if (!why && s.names_bos && !bos_text)
        why = "it writes bos_token, but the tokenizer has no bos token (bos_token_id)";
    if (why) {
        error_set("%s: input.chat: the chat template is not one tripar renders%s%s; it begins "
                  "\"%s\". tripar recognises " CHAT_FAMILIES
                  " from the template text (it runs no Jinja); give the prompt already "
                  "formatted in input.text without input.chat",
                  where, why[0] ? ": " : "", why, head);
        scan_free(&s);
        return STATUS_BAD_INPUT;
    }
    size_t b = 0, e = strlen(user);
    if (s.trims) py_strip(user, &b, &e);
    char *content = xmalloc(e - b + 1);
    memcpy(content, user + b, e - b);
    content[e - b] = '\0';
    const char *bos = s.names_bos ? bos_text : "";
    if (f.family == CHAT_CHATML) {
        const char *parts[] = {f.system, "<|im_start|>user\n", content, "<|im_end|>\n",
                               "<|im_start|>assistant\n"};
        *out = concat(parts, 5);
    } else if (f.family == CHAT_LLAMA3) {
        const char *parts[] = {bos, "<|start_header_id|>user<|end_header_id|>\n\n", content,
                               "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n"};
        *out = concat(parts, 5);
    } else {
        const char *parts[] = {bos, f.open, content, f.close};
        *out = concat(parts, 4);
    }
    *family = f.family;
    free(content);
    scan_free(&s);
    return STATUS_OK;
}
