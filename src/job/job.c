/* Loads a job: reads the YAML tree (job_tree.c), applies --set overrides, checks every key,
 * type and range against docs/jobs.md, fills defaults and resolves the inputs to tokens. */
#include "job/job.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/check.h"
#include "base/hash.h"
#include "base/path.h"
#include "job/job_tree.h"
#include "job/presets.h"

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int rc_try_ = (expr);                                                                      \
        if (rc_try_) return rc_try_;                                                               \
    } while (0)

/* Caps keep every derived product (batch * length, 4 * embd, ...) inside an int. */
#define CAP_DIM (1L << 20)
#define CAP_VOCAB (1L << 28)
#define CAP_TOKENS (1L << 28)
#define CAP_TEXT (64L << 20)

static const char *const NORM_NAMES[] = {"pre", "post", NULL};
static const char *const ARCH_NAMES[] = {"gpt2", "llama", NULL};
static const char *const PRECISION_NAMES[] = {"fp32", "int8w", "bf16", "fp16", NULL};
static const char *const KV_CACHE_NAMES[] = {"contiguous", "paged", NULL};
static const char *const BACKEND_NAMES[] = {"cpu", "cuda", NULL};
static const char *const COMM_NAMES[] = {"auto", "mpi", "nccl", NULL};
static const char *const SAMPLING_NAMES[] = {"greedy", "sample", NULL};
static const char *const TIMINGS_NAMES[] = {"off", "step", "layer", NULL};
static const char *const CPU_ISA_NAMES[] = {"auto",        "scalar",      "avx2",     "avx512",
                                            "avx512_vnni", "avx512_bf16", "amx_bf16", NULL};

static const char *const SECTION_KEYS[] = {"model",    "backend", "parallel", "input",
                                           "generate", "bench",   "record",   NULL};
static const char *const MODEL_KEYS[] = {"synthetic", "checkpoint", "tokenizer",     "norm",
                                         "precision", "int8_group", "quantize_head", "kv_cache",
                                         "kv_block",  "ln_eps",     "arch",          NULL};
static const char *const SYNTHETIC_KEYS[] = {
    "layers",   "heads",      "embd",         "vocab",          "ctx",      "mlp", "seed", "preset",
    "kv_heads", "rope_theta", "rope_scaling", "tie_embeddings", "head_dim", NULL};
/* Keys that only a Llama model has. */
static const char *const LLAMA_ONLY_KEYS[] = {"kv_heads",       "rope_theta", "rope_scaling",
                                              "tie_embeddings", "head_dim",   NULL};
static const char *const ROPE_SCALING_KEYS[] = {"factor", "low_freq_factor", "high_freq_factor",
                                                "original_max_position_embeddings", NULL};
static const char *const BACKEND_KEYS[] = {"kind", "threads",     "cpu_isa", "device",
                                           "comm", "cuda_graphs", "tf32",    NULL};
static const char *const PARALLEL_KEYS[] = {"dp",    "tp",      "pp",     "microbatches",
                                            "order", "overlap", "chunks", NULL};
static const char *const INPUT_KEYS[] = {"tokens",    "tokens_file", "text",
                                         "text_file", "synthetic",   NULL};
static const char *const INPUT_SYNTHETIC_KEYS[] = {"batch", "length", "seed", NULL};
static const char *const GENERATE_KEYS[] = {"new_tokens", "sampling", "temperature",
                                            "top_k",      "seed",     NULL};
static const char *const BENCH_KEYS[] = {"warmup",   "iterations",   "roofline", "arrival_rate",
                                         "duration", "arrival_seed", NULL};
static const char *const RECORD_KEYS[] = {
    "out",           "activations",        "timings",   "flush_every",
    "flush_seconds", "stop_grace_seconds", "telemetry", NULL};

/* Values of these keys are strings taken verbatim from --set (a text may hold ": "). */
static const char *const RAW_KEYS[] = {
    "model.checkpoint", "input.text", "input.tokens_file", "input.text_file", "record.out",
    "model.tokenizer",  NULL};

/* Keys whose value is a path (docs/jobs.md, type "path"). */
static const char *const PATH_KEYS[] = {"model.checkpoint", "input.tokens_file", "input.text_file",
                                        "model.tokenizer", NULL};

int job_key_is_path(const char *key) {
    for (int i = 0; PATH_KEYS[i]; i++)
        if (!strcmp(key, PATH_KEYS[i])) return 1;
    return 0;
}

static const char *enum_name(const char *const *names, int count, int k) {
    return k >= 0 && k < count ? names[k] : "?";
}
const char *norm_kind_name(norm_kind k) { return enum_name(NORM_NAMES, 2, (int)k); }
const char *arch_kind_name(arch_kind k) { return enum_name(ARCH_NAMES, 2, (int)k); }
const char *precision_kind_name(precision_kind k) { return enum_name(PRECISION_NAMES, 4, (int)k); }
const char *kv_cache_kind_name(kv_cache_kind k) { return enum_name(KV_CACHE_NAMES, 2, (int)k); }
const char *backend_kind_name(backend_kind k) { return enum_name(BACKEND_NAMES, 2, (int)k); }
const char *const *job_cpu_isa_names(void) { return CPU_ISA_NAMES; }
const char *comm_kind_name(comm_kind k) { return enum_name(COMM_NAMES, 3, (int)k); }
const char *sampling_kind_name(sampling_kind k) { return enum_name(SAMPLING_NAMES, 2, (int)k); }
const char *timings_level_name(timings_level k) { return enum_name(TIMINGS_NAMES, 3, (int)k); }

static void names_join(const char *const *names, char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
    }
}

/* ---- where keys were set ------------------------------------------------------------- */

static void job_key_note(job *j, const char *key, const jnode *key_node) {
    job_key_where *w = NULL;
    for (int i = 0; i < j->n_keys; i++)
        if (strcmp(j->keys[i].key, key) == 0) w = &j->keys[i];
    if (!w) {
        if (j->n_keys == JOB_MAX_KEYS || strlen(key) >= sizeof w->key) return;
        w = &j->keys[j->n_keys++];
        snprintf(w->key, sizeof w->key, "%s", key);
    }
    w->line = key_node->line;
    w->set[0] = '\0';
    if (key_node->line == 0) {
        size_t len = strlen(key_node->origin);
        if (len < sizeof w->set)
            memcpy(w->set, key_node->origin, len + 1);
        else
            snprintf(w->set, sizeof w->set, "%.*s...", (int)sizeof w->set - 4, key_node->origin);
    }
}

static const job_key_where *job_key_find(const job *j, const char *key) {
    for (int i = 0; i < j->n_keys; i++)
        if (strcmp(j->keys[i].key, key) == 0) return &j->keys[i];
    return NULL;
}

int job_key_line(const job *j, const char *key) {
    const job_key_where *w = job_key_find(j, key);
    return w ? w->line : 0;
}

const char *job_key_origin(const job *j, const char *key, char *buf, size_t len) {
    const job_key_where *w = job_key_find(j, key);
    if (w && w->set[0])
        snprintf(buf, len, "%s", w->set);
    else if (w && w->line > 0)
        snprintf(buf, len, "%s:%d", j->source, w->line);
    else
        snprintf(buf, len, "%s", j->source[0] ? j->source : "job");
    return buf;
}

/* Reports at the first of the NULL-terminated keys that was set, else at the file. */
static int job_fail_at(const job *j, const char *const *keys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int job_fail_at(const job *j, const char *const *keys, const char *fmt, ...) {
    char message[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    const job_key_where *w = NULL;
    for (int i = 0; keys[i] && !w; i++)
        w = job_key_find(j, keys[i]);
    if (w && w->set[0])
        error_set("%s: %s", w->set, message);
    else if (w && w->line > 0)
        error_set("%s:%d: %s", j->source, w->line, message);
    else
        error_set("%s: %s", j->source[0] ? j->source : "job", message);
    return STATUS_BAD_INPUT;
}
#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- typed reads of one key ---------------------------------------------------------- */

typedef struct {
    job *j;
    jtree tree;
    char dir[JOB_PATH_MAX]; /* the job file's directory, for relative paths in it */
} job_loader;

/* The value of section.key in map m, noting where it was set; NULL when absent. */
static const jnode *job_field(job_loader *L, const jnode *m, const char *section, const char *key,
                              const jnode **key_node) {
    const jnode *k = NULL;
    const jnode *v = jnode_get(m, key, &k);
    if (v) {
        char full[128];
        snprintf(full, sizeof full, "%s.%s", section, key);
        job_key_note(L->j, full, k);
        if (key_node) *key_node = k;
    }
    return v;
}

/* Checks that every key of section m is allowed. A null section counts as empty. */
static int job_section_check(const jnode *m, const jnode *m_key, const char *section,
                             const char *const *allowed) {
    char list[512];
    names_join(allowed, list, sizeof list);
    if (!m || m->type == JNODE_NULL) return STATUS_OK;
    if (m->type != JNODE_MAP) {
        char buf[128];
        return jnode_fail(m_key ? m_key : m, "%s must be a mapping of keys (%s), got %s", section,
                          list, jnode_describe(m, buf, sizeof buf));
    }
    for (int i = 0; i < m->n; i++) {
        int known = 0;
        for (int a = 0; allowed[a]; a++)
            known |= !strcmp(m->keys[i]->value, allowed[a]);
        if (known) continue;
        if (!strcmp(section, "job"))
            return jnode_fail(m->keys[i], "unknown section '%s'; allowed: %s", m->keys[i]->value,
                              list);
        if (strchr(section, '.'))
            return jnode_fail(m->keys[i], "unknown key '%s' in %s; allowed: %s", m->keys[i]->value,
                              section, list);
        return jnode_fail(m->keys[i], "unknown key '%s' in section '%s'; allowed: %s",
                          m->keys[i]->value, section, list);
    }
    return STATUS_OK;
}

/* 1 when a plain scalar is an integer written with a leading zero ("010", "-07"): YAML 1.1
 * readers (PyYAML, and so most tools that write job files) take it as octal, 8, while a
 * decimal reading gives 10. Neither guess is safe, so such a value is refused. */
static int job_leading_zero(const char *s) {
    if (*s == '-' || *s == '+') s++;
    if (s[0] != '0' || s[1] < '0' || s[1] > '9') return 0;
    while (*s >= '0' && *s <= '9')
        s++;
    return *s == '\0';
}

static int job_refuse_leading_zero(const jnode *v, const char *name) {
    return jnode_fail(v,
                      "%s: '%s' has a leading zero, which YAML 1.1 reads as octal; write the "
                      "number without it",
                      name, v->value);
}

static int job_parse_long(const jnode *v, const char *name, long lo, long hi, long *out) {
    char buf[128];
    if (v->type != JNODE_SCALAR || v->quoted || (v->tag != JTAG_NONE && v->tag != JTAG_INT))
        return jnode_fail(v, "%s: expected an integer, got %s", name,
                          jnode_describe(v, buf, sizeof buf));
    if (job_leading_zero(v->value)) return job_refuse_leading_zero(v, name);
    errno = 0;
    char *end = NULL;
    long long x = strtoll(v->value, &end, 10);
    if (end == v->value || *end || (v->value[0] < '0' && v->value[0] != '-' && v->value[0] != '+'))
        return jnode_fail(v, "%s: expected an integer, got %s", name,
                          jnode_describe(v, buf, sizeof buf));
    if (errno == ERANGE || x < lo || x > hi)
        return jnode_fail(v, "%s = %s is out of range; allowed: %ld to %ld", name, v->value, lo,
                          hi);
    *out = (long)x;
    return STATUS_OK;
}

static int job_get_int(job_loader *L, const jnode *m, const char *section, const char *key, long lo,
                       long hi, int *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char name[128];
    snprintf(name, sizeof name, "%s.%s", section, key);
    long x = 0;
    TRY(job_parse_long(v, name, lo, hi, &x));
    *out = (int)x;
    return STATUS_OK;
}

static int job_get_u64(job_loader *L, const jnode *m, const char *section, const char *key,
                       uint64_t *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char buf[128];
    errno = 0;
    char *end = NULL;
    unsigned long long x = v->type == JNODE_SCALAR ? strtoull(v->value, &end, 10) : 0;
    if (v->type == JNODE_SCALAR && !v->quoted && job_leading_zero(v->value)) {
        char name[128];
        snprintf(name, sizeof name, "%s.%s", section, key);
        return job_refuse_leading_zero(v, name);
    }
    if (v->type != JNODE_SCALAR || v->quoted || (v->tag != JTAG_NONE && v->tag != JTAG_INT) ||
        end == v->value || *end || errno == ERANGE || v->value[0] < '0' || v->value[0] > '9')
        return jnode_fail(v, "%s.%s: expected an integer from 0 to 2^64-1, got %s", section, key,
                          jnode_describe(v, buf, sizeof buf));
    *out = (uint64_t)x;
    return STATUS_OK;
}

/* The largest value a float key takes: below FLT_MAX, so the value stays finite as a float. */
#define JOB_FLOAT_MAX 3.0e38

/* A float above lo (exclusive) and at most JOB_FLOAT_MAX; or exactly 0 when zero_off (the key's
 * "off"). The message states that whole range. */
static int job_get_float(job_loader *L, const jnode *m, const char *section, const char *key,
                         double lo, int zero_off, float *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char buf[128], name[128];
    snprintf(name, sizeof name, "%s.%s", section, key);
    errno = 0;
    char *end = NULL;
    double x = v->type == JNODE_SCALAR ? strtod(v->value, &end) : 0;
    if (v->type != JNODE_SCALAR || v->quoted || v->tag == JTAG_BOOL || end == v->value || *end ||
        !isfinite(x) || (v->value[0] < '0' && !strchr("+-.", v->value[0])) ||
        strpbrk(v->value, "xXpP")) /* strtod's hex floats are no YAML number */
        return jnode_fail(v, "%s: expected a number, got %s", name,
                          jnode_describe(v, buf, sizeof buf));
    if (job_leading_zero(v->value)) return job_refuse_leading_zero(v, name);
    if (!(x > lo || (zero_off && x == 0)) || x > JOB_FLOAT_MAX)
        return jnode_fail(v, "%s = %s is out of range; allowed: %s> %g and <= %g", name, v->value,
                          zero_off ? "0 (off), or " : "", lo, JOB_FLOAT_MAX);
    /* A positive value below float's range (temperature: 1e-300) would round to 0, which the
     * resolved job could then not be read back with; keep it the smallest positive float. */
    *out = x > 0 && x < FLT_MIN ? FLT_MIN : (float)x;
    return STATUS_OK;
}

static int job_get_bool(job_loader *L, const jnode *m, const char *section, const char *key,
                        int *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    static const char *const yes[] = {"true", "yes", "on", NULL}, *const no[] = {"false", "no",
                                                                                 "off", NULL};
    int plain =
        v->type == JNODE_SCALAR && !v->quoted && (v->tag == JTAG_NONE || v->tag == JTAG_BOOL);
    for (int i = 0; plain && yes[i]; i++) {
        if (!strcasecmp(v->value, yes[i])) return *out = 1, STATUS_OK;
        if (!strcasecmp(v->value, no[i])) return *out = 0, STATUS_OK;
    }
    char buf[128];
    return jnode_fail(v, "%s.%s: expected true or false, got %s", section, key,
                      jnode_describe(v, buf, sizeof buf));
}

static int job_parse_enum(const jnode *v, const char *name, const char *const *names, int *out) {
    char list[256], buf[128];
    names_join(names, list, sizeof list);
    if (v->type == JNODE_SCALAR)
        for (int i = 0; names[i]; i++)
            if (!strcmp(v->value, names[i])) return *out = i, STATUS_OK;
    return jnode_fail(v, "%s: %s is not allowed; allowed: %s", name,
                      jnode_describe(v, buf, sizeof buf), list);
}

static int job_get_enum(job_loader *L, const jnode *m, const char *section, const char *key,
                        const char *const *names, int *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char name[128];
    snprintf(name, sizeof name, "%s.%s", section, key);
    return job_parse_enum(v, name, names, out);
}

static int job_get_string(job_loader *L, const jnode *m, const char *section, const char *key,
                          char *out, size_t size) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char buf[128];
    if (v->type != JNODE_SCALAR || !v->value[0])
        return jnode_fail(v, "%s.%s: expected a non-empty string, got %s", section, key,
                          jnode_describe(v, buf, sizeof buf));
    if (strlen(v->value) >= size)
        return jnode_fail(v, "%s.%s: longer than %zu characters", section, key, size - 1);
    memcpy(out, v->value, strlen(v->value) + 1);
    return STATUS_OK;
}

/* dir/given as an absolute path, dir being absolute, "." (the working directory cwd) or
 * relative to cwd. Returns STATUS_OK, or fails at v when it does not fit. */
static int job_path_join(char *out, const char *dir, const char *cwd, const char *given,
                         const jnode *v, const char *section, const char *key) {
    int len = dir[0] == '/'       ? snprintf(out, JOB_PATH_MAX, "%s/%s", dir, given)
              : !strcmp(dir, ".") ? snprintf(out, JOB_PATH_MAX, "%s/%s", cwd, given)
                                  : snprintf(out, JOB_PATH_MAX, "%s/%s/%s", cwd, dir, given);
    if (len >= JOB_PATH_MAX)
        return jnode_fail(v, "%s.%s: path longer than %d characters", section, key,
                          JOB_PATH_MAX - 1);
    return STATUS_OK;
}

/* A file path. A relative one written in the job file is looked up in the job file's directory
 * first and, when it is not there, in the working directory: a job kept beside its files finds
 * them from anywhere, and a job in jobs/ may name data/prompts/... for runs from the repository
 * root. One given with --set is relative to the working directory only, as on any command
 * line. Resolved to an absolute path, so a dumped job still names the same file wherever it is
 * reloaded. */
static int job_get_path(job_loader *L, const jnode *m, const char *section, const char *key,
                        char *out) {
    char given[JOB_PATH_MAX];
    given[0] = '\0';
    TRY(job_get_string(L, m, section, key, given, sizeof given));
    if (!given[0]) return STATUS_OK;
    const jnode *v = jnode_get(m, key, NULL);
    char cwd[JOB_PATH_MAX], fallback[JOB_PATH_MAX];
    fallback[0] = '\0';
    if (given[0] == '/' || !getcwd(cwd, sizeof cwd)) {
        snprintf(out, JOB_PATH_MAX, "%s", given);
    } else {
        const char *dir = v->line > 0 ? L->dir : ".";
        TRY(job_path_join(out, dir, cwd, given, v, section, key));
        if (strcmp(dir, ".") != 0 && access(out, F_OK) != 0) {
            TRY(job_path_join(fallback, ".", cwd, given, v, section, key));
            if (access(fallback, F_OK) == 0) memcpy(out, fallback, strlen(fallback) + 1);
        }
    }
    if (access(out, R_OK) != 0) {
        if (fallback[0] && strcmp(out, fallback) != 0)
            return jnode_fail(v, "%s.%s: cannot read '%s' (nor '%s' in the working directory): %s",
                              section, key, out, fallback, strerror(errno));
        return jnode_fail(v, "%s.%s: cannot read '%s': %s", section, key, out, strerror(errno));
    }
    return STATUS_OK;
}

/* ---- sections ------------------------------------------------------------------------ */

/* model.arch. A checkpoint names its own architecture; model.arch given with one must agree
 * (the runner checks once the file is read). */
static int job_walk_arch(job_loader *L, const jnode *m) {
    int e = (int)L->j->arch;
    L->j->arch_given = jnode_get(m, "arch", NULL) != NULL;
    TRY(job_get_enum(L, m, "model", "arch", ARCH_NAMES, &e));
    L->j->arch = (arch_kind)e;
    return STATUS_OK;
}

/* The Llama keys of model.synthetic: kv_heads, head_dim, rope_theta, rope_scaling,
 * tie_embeddings.
 * Refused on a GPT-2 model, which has none of them. */
static int job_walk_llama_keys(job_loader *L, const jnode *syn) {
    job *j = L->j;
    const char *s = "model.synthetic";
    for (int i = 0; j->arch == ARCH_GPT2 && LLAMA_ONLY_KEYS[i]; i++) {
        const jnode *k = NULL;
        if (jnode_get(syn, LLAMA_ONLY_KEYS[i], &k))
            return jnode_fail(k,
                              "model.synthetic.%s is a Llama key; it needs model.arch: llama "
                              "(the model is gpt2)",
                              LLAMA_ONLY_KEYS[i]);
    }
    if (j->arch == ARCH_GPT2) {
        j->kv_heads = j->heads, j->tie_embeddings = 1, j->rope_scaling = 0, j->head_dim = 0;
        return STATUS_OK;
    }
    const jnode *kv_key = NULL;
    if (!jnode_get(syn, "kv_heads", &kv_key) && (j->kv_heads < 1 || j->heads % j->kv_heads))
        j->kv_heads = j->heads; /* a preset's kv_heads no longer fits heads given after it */
    TRY(job_get_int(L, syn, s, "kv_heads", 1, 1 << 16, &j->kv_heads));
    if (j->kv_heads > j->heads || j->heads % j->kv_heads)
        return jnode_fail(kv_key ? kv_key : syn,
                          "model.synthetic.kv_heads = %d does not divide model.synthetic.heads "
                          "= %d (each kv head serves heads / kv_heads query heads)",
                          j->kv_heads, j->heads);
    /* head_dim apart from embd / heads (Mistral-Nemo); 0 or absent = embd / heads. Odd values
     * are refused with the RoPE check in job_validate. */
    TRY(job_get_int(L, syn, s, "head_dim", 0, 1 << 16, &j->head_dim));
    TRY(job_get_float(L, syn, s, "rope_theta", 0.0, 0, &j->rope_theta));
    if (j->tie_embeddings < 0) j->tie_embeddings = 0;
    TRY(job_get_bool(L, syn, s, "tie_embeddings", &j->tie_embeddings));
    const jnode *rs_key = NULL;
    const jnode *rs = job_field(L, syn, s, "rope_scaling", &rs_key);
    if (!rs) return STATUS_OK;
    if (rs->type == JNODE_NULL) { /* rope_scaling: null turns a preset's scaling off */
        j->rope_scaling = 0;
        return STATUS_OK;
    }
    const char *rsn = "model.synthetic.rope_scaling";
    TRY(job_section_check(rs, rs_key, rsn, ROPE_SCALING_KEYS));
    if (!j->rope_scaling) { /* absent keys take Llama 3.1's values */
        j->rope_factor = 8.0f, j->rope_low_freq_factor = 1.0f, j->rope_high_freq_factor = 4.0f;
        j->rope_original_ctx = 8192;
    }
    j->rope_scaling = 1;
    TRY(job_get_float(L, rs, rsn, "factor", 0.0, 0, &j->rope_factor));
    TRY(job_get_float(L, rs, rsn, "low_freq_factor", 0.0, 0, &j->rope_low_freq_factor));
    TRY(job_get_float(L, rs, rsn, "high_freq_factor", 0.0, 0, &j->rope_high_freq_factor));
    TRY(job_get_int(L, rs, rsn, "original_max_position_embeddings", 1, CAP_DIM,
                    &j->rope_original_ctx));
    if (!(j->rope_high_freq_factor > j->rope_low_freq_factor))
        return jnode_fail(rs_key,
                          "%s: high_freq_factor = %g must be more than low_freq_factor "
                          "= %g (the rule divides by their difference)",
                          rsn, (double)j->rope_high_freq_factor, (double)j->rope_low_freq_factor);
    return STATUS_OK;
}

/* model.int8_group and model.quantize_head: how int8w scales its weights, and whether the LM
 * head takes the weight precision. */
static int job_walk_quantization(job_loader *L, const jnode *m) {
    job *j = L->j;
    j->int8_group = 0, j->quantize_head = -1;
    TRY(job_get_int(L, m, "model", "int8_group", 0, 1 << 16, &j->int8_group));
    const jnode *g = NULL;
    if (j->int8_group % 32 != 0 && jnode_get(m, "int8_group", &g))
        return jnode_fail(g,
                          "model.int8_group: %d is not a multiple of 32 (an int8 activation "
                          "block); allowed: 0 (one scale per row), 32, 64, 96, 128, ...",
                          j->int8_group);
    if (j->int8_group > 0 && j->precision != PRECISION_INT8W && jnode_get(m, "int8_group", &g))
        return jnode_fail(g,
                          "model.int8_group needs model.precision: int8w (it is %s); allowed "
                          "with %s: 0",
                          precision_kind_name(j->precision), precision_kind_name(j->precision));
    const jnode *q = job_field(L, m, "model", "quantize_head", NULL);
    if (!q || (q->type == JNODE_SCALAR && !q->quoted && !strcmp(q->value, "auto")))
        return STATUS_OK;
    int on = 0;
    if (job_get_bool(L, m, "model", "quantize_head", &on) != STATUS_OK) {
        char buf[128];
        return jnode_fail(q, "model.quantize_head: expected auto, true or false, got %s",
                          jnode_describe(q, buf, sizeof buf));
    }
    j->quantize_head = on;
    return STATUS_OK;
}

static int job_walk_model(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    TRY(job_section_check(m, m_key, "model", MODEL_KEYS));
    const jnode *syn_key = NULL, *ck_key = NULL;
    const jnode *syn = job_field(L, m, "model", "synthetic", &syn_key);
    const jnode *ck = job_field(L, m, "model", "checkpoint", &ck_key);
    if (syn && ck) {
        const jnode *later = ck_key->line == 0 || ck_key->line > syn_key->line ? ck_key : syn_key;
        return jnode_fail(later, "model: give either synthetic or checkpoint, not both");
    }
    if (!syn && !ck) {
        const char *msg = "model: give model.synthetic {layers, heads, embd, vocab, ctx, mlp, "
                          "seed} or model.checkpoint PATH";
        if (m_key) return jnode_fail(m_key, "%s", msg);
        error_set("%s: missing section 'model'; %s", j->source, msg);
        return STATUS_BAD_INPUT;
    }
    j->ln_eps = 1e-5f;
    j->rope_theta = 10000.0f;
    j->tie_embeddings = -1; /* resolved by arch below */
    if (syn) {
        j->synthetic = 1;
        j->layers = 2, j->heads = 4, j->embd = 64, j->vocab = 256, j->ctx = 128, j->mlp = 0;
        j->seed = 1234;
        TRY(job_section_check(syn, syn_key, "model.synthetic", SYNTHETIC_KEYS));
        const char *s = "model.synthetic";
        /* The preset first: every other key overrides it. */
        TRY(job_get_string(L, syn, s, "preset", j->preset, sizeof j->preset));
        if (j->preset[0] && job_preset_apply(j, j->preset) != 0)
            return jnode_fail(jnode_get(syn, "preset", NULL),
                              "model.synthetic.preset: '%s' is not a preset; allowed: %s",
                              j->preset, job_preset_list());
        TRY(job_walk_arch(L, m));
        TRY(job_get_int(L, syn, s, "layers", 1, 1 << 16, &j->layers));
        TRY(job_get_int(L, syn, s, "heads", 1, 1 << 16, &j->heads));
        TRY(job_get_int(L, syn, s, "embd", 1, CAP_DIM, &j->embd));
        TRY(job_get_int(L, syn, s, "vocab", 2, CAP_VOCAB, &j->vocab));
        TRY(job_get_int(L, syn, s, "ctx", 1, CAP_DIM, &j->ctx));
        TRY(job_get_int(L, syn, s, "mlp", 0, 4 * CAP_DIM, &j->mlp));
        TRY(job_get_u64(L, syn, s, "seed", &j->seed));
        if (j->mlp == 0) j->mlp = 4 * j->embd;
        TRY(job_walk_llama_keys(L, syn));
    } else {
        TRY(job_walk_arch(L, m));
        j->tie_embeddings = 1; /* the shape, llama or not, is the checkpoint's (the runner) */
        TRY(job_get_path(L, m, "model", "checkpoint", j->checkpoint));
    }
    TRY(job_get_path(L, m, "model", "tokenizer", j->tokenizer)); /* io/prompt.c reads it */
    int e = 0;
    TRY(job_get_enum(L, m, "model", "norm", NORM_NAMES, &e));
    j->norm = (norm_kind)e;
    e = 0;
    TRY(job_get_enum(L, m, "model", "precision", PRECISION_NAMES, &e));
    j->precision = (precision_kind)e;
    TRY(job_walk_quantization(L, m));
    e = 0;
    TRY(job_get_enum(L, m, "model", "kv_cache", KV_CACHE_NAMES, &e));
    j->kv_cache = (kv_cache_kind)e;
    j->kv_block = 16;
    TRY(job_get_int(L, m, "model", "kv_block", 1, 1 << 16, &j->kv_block));
    TRY(job_get_float(L, m, "model", "ln_eps", 0.0, 0, &j->ln_eps));
    const jnode *norm_key = NULL;
    if (j->arch == ARCH_LLAMA && j->norm == NORM_POST && jnode_get(m, "norm", &norm_key))
        return jnode_fail(norm_key, "model.norm: post is not allowed with model.arch: llama "
                                    "(Llama normalises before each block); allowed: pre");
    return STATUS_OK;
}

static int job_walk_backend(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->backend = BACKEND_CPU, j->threads = 0, j->cpu_isa = 0, j->device = -1, j->comm = COMM_AUTO;
    j->cuda_graphs = 0, j->allow_tf32 = 0;
    int e = 0;
    if (m && m->type == JNODE_SCALAR) { /* the short form "backend: cuda" */
        job_key_note(j, "backend.kind", m_key);
        TRY(job_parse_enum(m, "backend", BACKEND_NAMES, &e));
        j->backend = (backend_kind)e;
        return STATUS_OK;
    }
    TRY(job_section_check(m, m_key, "backend", BACKEND_KEYS));
    TRY(job_get_enum(L, m, "backend", "kind", BACKEND_NAMES, &e));
    j->backend = (backend_kind)e;
    TRY(job_get_int(L, m, "backend", "threads", 0, 4096, &j->threads));
    TRY(job_get_enum(L, m, "backend", "cpu_isa", CPU_ISA_NAMES, &j->cpu_isa));
    TRY(job_get_int(L, m, "backend", "device", -1, 4096, &j->device));
    e = 0;
    TRY(job_get_enum(L, m, "backend", "comm", COMM_NAMES, &e));
    j->comm = (comm_kind)e;
    TRY(job_get_bool(L, m, "backend", "cuda_graphs", &j->cuda_graphs));
    TRY(job_get_bool(L, m, "backend", "tf32", &j->allow_tf32));
    if (j->backend == BACKEND_CUDA && j->int8_group > 0)
        return job_fail_at(j, KEYS("model.int8_group"),
                           "model.int8_group: %d needs backend.kind: cpu (the cuda kernels scale "
                           "int8 weights per row); allowed with cuda: 0",
                           j->int8_group);
    if (j->backend == BACKEND_CUDA && j->cpu_isa != 0)
        return job_fail_at(j, KEYS("backend.cpu_isa"),
                           "backend.cpu_isa: %s chooses the cpu backend's kernels; allowed with "
                           "backend.kind cuda: auto",
                           CPU_ISA_NAMES[j->cpu_isa]);
    if (j->comm == COMM_NCCL && j->backend != BACKEND_CUDA)
        return job_fail_at(
            j, KEYS("backend.comm"),
            "backend.comm: nccl needs backend.kind: cuda; allowed on cpu: auto, mpi");
    return STATUS_OK;
}

/* The six axis permutations, and auto: the mesh lays tp-pp-dp over the ranks sorted by
 * (node, local rank) and refuses a tp that fits no node, which needs the nodes, so it is
 * checked when the mesh is built (parallel/mesh.c), not here. */
static int job_order_check(const char *order) {
    static const char *const perms[] = {"tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp",
                                        "dp-tp-pp", "dp-pp-tp", "auto",     NULL};
    for (int i = 0; perms[i]; i++)
        if (!strcmp(order, perms[i])) return 1;
    return 0;
}

static int job_walk_parallel(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->dp = j->tp = j->pp = 1, j->microbatches = 1, j->overlap = 0, j->chunks = 2;
    snprintf(j->order, sizeof j->order, "tp-pp-dp");
    TRY(job_section_check(m, m_key, "parallel", PARALLEL_KEYS));
    TRY(job_get_int(L, m, "parallel", "dp", 1, CAP_DIM, &j->dp));
    TRY(job_get_int(L, m, "parallel", "tp", 1, CAP_DIM, &j->tp));
    TRY(job_get_int(L, m, "parallel", "pp", 1, CAP_DIM, &j->pp));
    TRY(job_get_int(L, m, "parallel", "microbatches", 1, CAP_DIM, &j->microbatches));
    const jnode *order = job_field(L, m, "parallel", "order", NULL);
    if (order && (order->type != JNODE_SCALAR || !job_order_check(order->value))) {
        char buf[128];
        return jnode_fail(order,
                          "parallel.order: %s is not allowed; allowed: tp, pp and dp each "
                          "once, joined by '-' (tp-pp-dp, tp-dp-pp, pp-tp-dp, pp-dp-tp, dp-tp-pp, "
                          "dp-pp-tp); the first axis varies fastest; or auto (TP inside a "
                          "node, then PP, then DP)",
                          jnode_describe(order, buf, sizeof buf));
    }
    if (order) snprintf(j->order, sizeof j->order, "%s", order->value);
    TRY(job_get_bool(L, m, "parallel", "overlap", &j->overlap));
    TRY(job_get_int(L, m, "parallel", "chunks", 1, 1 << 16, &j->chunks));
    return STATUS_OK;
}

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

static int job_walk_input(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    TRY(job_section_check(m, m_key, "input", INPUT_KEYS));
    const char *given = NULL;
    const jnode *given_key = NULL;
    char list[128];
    names_join(INPUT_KEYS, list, sizeof list);
    for (int i = 0; INPUT_KEYS[i]; i++) {
        const jnode *k = NULL;
        if (!jnode_get(m, INPUT_KEYS[i], &k)) continue;
        if (given)
            return jnode_fail(k, "input: give exactly one of %s; got both '%s' and '%s'", list,
                              given, INPUT_KEYS[i]);
        given = INPUT_KEYS[i], given_key = k;
    }
    if (!given) {
        if (m_key) return jnode_fail(m_key, "input: give exactly one of %s", list);
        error_set("%s: missing section 'input'; give exactly one of input.%s", j->source,
                  "tokens, input.tokens_file, input.text, input.text_file, input.synthetic");
        return STATUS_BAD_INPUT;
    }
    (void)given_key;
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
    TRY(job_section_check(v, syn_key, "input.synthetic", INPUT_SYNTHETIC_KEYS));
    j->synthetic_input = 1, j->batch = 1, j->prompt_len = 16, j->input_seed = 42;
    TRY(job_get_int(L, v, "input.synthetic", "batch", 1, CAP_DIM, &j->batch));
    TRY(job_get_int(L, v, "input.synthetic", "length", 1, CAP_DIM, &j->prompt_len));
    TRY(job_get_u64(L, v, "input.synthetic", "seed", &j->input_seed));
    if ((long)j->batch * j->prompt_len > CAP_TOKENS)
        return jnode_fail(syn_key, "input.synthetic: batch * length is more than %ld tokens",
                          CAP_TOKENS);
    return STATUS_OK;
}

static int job_walk_generate(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->new_tokens = 16, j->sampling = SAMPLING_GREEDY, j->temperature = 1.0f, j->top_k = 0;
    j->sample_seed = 1;
    TRY(job_section_check(m, m_key, "generate", GENERATE_KEYS));
    TRY(job_get_int(L, m, "generate", "new_tokens", 0, CAP_DIM, &j->new_tokens));
    int e = 0;
    TRY(job_get_enum(L, m, "generate", "sampling", SAMPLING_NAMES, &e));
    j->sampling = (sampling_kind)e;
    TRY(job_get_float(L, m, "generate", "temperature", 0.0, 0, &j->temperature));
    TRY(job_get_int(L, m, "generate", "top_k", 0, CAP_VOCAB, &j->top_k));
    TRY(job_get_u64(L, m, "generate", "seed", &j->sample_seed));
    return STATUS_OK;
}

static int job_walk_bench(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->warmup = 0, j->iterations = 1;
    TRY(job_section_check(m, m_key, "bench", BENCH_KEYS));
    TRY(job_get_int(L, m, "bench", "warmup", 0, 1 << 24, &j->warmup));
    TRY(job_get_int(L, m, "bench", "iterations", 1, 1 << 24, &j->iterations));
    TRY(job_get_bool(L, m, "bench", "roofline", &j->roofline));
    j->arrival_rate = 0.0f, j->duration = 10.0f, j->arrival_seed = 1;
    TRY(job_get_float(L, m, "bench", "arrival_rate", 0.0, 1, &j->arrival_rate));
    TRY(job_get_float(L, m, "bench", "duration", 0.0, 0, &j->duration));
    TRY(job_get_u64(L, m, "bench", "arrival_seed", &j->arrival_seed));
    return STATUS_OK;
}

/* The layer index of "layer.N.attn" / "layer.N.mlp", -1 for embed, final, logits and all,
 * -2 for anything else. */
static long job_activation_layer(const char *name) {
    if (!strcmp(name, "embed") || !strcmp(name, "final") || !strcmp(name, "logits") ||
        !strcmp(name, "all"))
        return -1;
    if (strncmp(name, "layer.", 6) != 0 || name[6] < '0' || name[6] > '9') return -2;
    char *end = NULL;
    errno = 0;
    long n = strtol(name + 6, &end, 10);
    if (errno || n > INT_MAX || (name[6] == '0' && end != name + 7)) return -2;
    if (strcmp(end, ".attn") != 0 && strcmp(end, ".mlp") != 0) return -2;
    return n;
}

static int job_walk_record(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    snprintf(j->out, sizeof j->out, "run.h5");
    j->timings = TIMINGS_STEP, j->flush_every = 0, j->flush_seconds = 10;
    j->stop_grace_seconds = 5;
    j->telemetry_hz = 10;
    TRY(job_section_check(m, m_key, "record", RECORD_KEYS));
    TRY(job_get_string(L, m, "record", "out", j->out, sizeof j->out));
    const jnode *acts = job_field(L, m, "record", "activations", NULL);
    if (acts) {
        const jnode *single = acts->type == JNODE_SCALAR ? acts : NULL;
        int n = single ? 1 : acts->type == JNODE_SEQ ? acts->n : 0;
        char buf[128];
        if (!single && acts->type != JNODE_SEQ && acts->type != JNODE_NULL)
            return jnode_fail(acts,
                              "record.activations: expected a sequence of point names, "
                              "got %s",
                              jnode_describe(acts, buf, sizeof buf));
        if (n > JOB_MAX_ACTIVATIONS)
            return jnode_fail(acts, "record.activations: more than %d points; use 'all'",
                              JOB_MAX_ACTIVATIONS);
        for (int i = 0; i < n; i++) {
            const jnode *p = single ? single : acts->items[i];
            if (p->type != JNODE_SCALAR || job_activation_layer(p->value) == -2)
                return jnode_fail(p,
                                  "record.activations: %s is not a point; allowed: embed, "
                                  "layer.N.attn, layer.N.mlp (N < model layers), final, logits, "
                                  "all",
                                  jnode_describe(p, buf, sizeof buf));
            for (int k = 0; k < j->n_activations; k++)
                if (!strcmp(j->activations[k], p->value))
                    return jnode_fail(p, "record.activations: '%s' is listed twice", p->value);
            j->activations[j->n_activations] = strdup(p->value);
            CHECK(j->activations[j->n_activations], "out of memory");
            j->n_activations++;
        }
    }
    int e = TIMINGS_STEP;
    TRY(job_get_enum(L, m, "record", "timings", TIMINGS_NAMES, &e));
    j->timings = (timings_level)e;
    TRY(job_get_int(L, m, "record", "flush_every", 0, INT_MAX, &j->flush_every));
    TRY(job_get_int(L, m, "record", "flush_seconds", 0, INT_MAX, &j->flush_seconds));
    TRY(job_get_int(L, m, "record", "stop_grace_seconds", 0, 86400, &j->stop_grace_seconds));
    TRY(job_get_int(L, m, "record", "telemetry", 0, JOB_TELEMETRY_MAX_HZ, &j->telemetry_hz));
    return STATUS_OK;
}

/* ---- public -------------------------------------------------------------------------- */

static int job_walk(job_loader *L) {
    job *j = L->j;
    const jnode *root = L->tree.root;
    TRY(job_section_check(root, NULL, "job", SECTION_KEYS));
    typedef int (*walk_fn)(job_loader *, const jnode *, const jnode *);
    static const walk_fn walks[] = {job_walk_model, job_walk_backend,  job_walk_parallel,
                                    job_walk_input, job_walk_generate, job_walk_bench,
                                    job_walk_record};
    for (int i = 0; SECTION_KEYS[i]; i++) {
        const jnode *key = NULL;
        const jnode *m = jnode_get(root, SECTION_KEYS[i], &key);
        if (m) job_key_note(j, SECTION_KEYS[i], key);
        TRY(walks[i](L, m, m ? key : NULL));
    }
    if (j->synthetic) {
        if (j->synthetic_input) job_fill_synthetic_tokens(j, j->vocab);
        TRY(job_validate_model(j));
    }
    return STATUS_OK;
}

int job_load(job *j, const char *path, const char *const *overrides, int n_overrides) {
    memset(j, 0, sizeof *j);
    error_clear();
    if (!path || strlen(path) >= sizeof j->source) {
        error_set("%s: job file path missing or too long", path ? "job" : "(null)");
        return STATUS_BAD_INPUT;
    }
    snprintf(j->source, sizeof j->source, "%s", path);
    job_loader L = {.j = j};
    snprintf(L.dir, sizeof L.dir, "%s", path);
    char *slash = strrchr(L.dir, '/');
    if (slash == L.dir)
        L.dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(L.dir, sizeof L.dir, ".");

    int rc = jtree_load_file(&L.tree, path);
    for (int i = 0; !rc && i < n_overrides; i++)
        rc = jtree_apply_override(&L.tree, overrides[i], RAW_KEYS);
    if (!rc) rc = job_walk(&L);
    jtree_free(&L.tree);
    if (rc) {
        job_free(j);
        return rc;
    }
    j->yaml = job_dump_string(j);
    return STATUS_OK;
}

void job_free(job *j) {
    if (!j) return;
    free(j->tokens);
    free(j->text);
    free(j->yaml);
    for (int i = 0; i < j->n_activations && i < JOB_MAX_ACTIVATIONS; i++)
        free(j->activations[i]);
    memset(j, 0, sizeof *j);
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

int job_records_activation(const job *j, const char *point) {
    for (int i = 0; i < j->n_activations; i++)
        if (!strcmp(j->activations[i], "all") || !strcmp(j->activations[i], point)) return 1;
    return 0;
}

/* The keys to blame for a bad prompt, most specific first. Static: the caller keeps them. */
static const char *const *job_input_keys(const job *j) {
    static const char *const synthetic[] = {"input.synthetic.length", "input.synthetic", "input",
                                            NULL};
    static const char *const tokens_file[] = {"input.tokens_file", "input", NULL};
    static const char *const text_file[] = {"input.text_file", "input", NULL};
    static const char *const text[] = {"input.text", "input", NULL};
    static const char *const tokens[] = {"input.tokens", "input", NULL};
    if (j->synthetic_input) return synthetic;
    if (j->tokens_file[0]) return tokens_file;
    if (j->text_file[0]) return text_file;
    if (j->text) return text;
    return tokens;
}

int job_validate_model(const job *j) {
    const char *const *model = KEYS("model.checkpoint", "model.synthetic", "model");
    if (j->layers < 1 || j->heads < 1 || j->embd < 1 || j->vocab < 2 || j->ctx < 1)
        return job_fail_at(j, model,
                           "model shape unknown or invalid: layers %d, heads %d, "
                           "embd %d, vocab %d, ctx %d",
                           j->layers, j->heads, j->embd, j->vocab, j->ctx);
    /* an explicit Llama head_dim frees the heads from splitting embd */
    if (j->embd % j->heads && !(j->arch == ARCH_LLAMA && j->head_dim > 0))
        return job_fail_at(j,
                           KEYS("model.synthetic.heads", "model.synthetic.embd", "model.checkpoint",
                                "model.synthetic", "model"),
                           "model.heads = %d does not divide model.embd = %d", j->heads, j->embd);
    if (j->heads % j->tp)
        return job_fail_at(j, KEYS("parallel.tp", "parallel"),
                           "parallel.tp = %d does not divide model.heads = %d (tensor parallelism "
                           "splits attention by heads)",
                           j->tp, j->heads);
    if (j->arch == ARCH_LLAMA && j->head_dim > 0 && j->head_dim % 2)
        return job_fail_at(j, KEYS("model.synthetic.head_dim", "model.checkpoint", "model"),
                           "model.synthetic.head_dim = %d is odd; RoPE rotates pairs of a head's "
                           "dimensions, so a Llama head dimension must be even",
                           j->head_dim);
    if (j->arch == ARCH_LLAMA && j->head_dim <= 0 && (j->embd / j->heads) % 2)
        return job_fail_at(j,
                           KEYS("model.synthetic.heads", "model.synthetic.embd", "model.checkpoint",
                                "model.synthetic", "model"),
                           "model.embd / model.heads = %d is odd; RoPE rotates pairs of a head's "
                           "dimensions, so a Llama head dimension must be even (or set "
                           "model.synthetic.head_dim)",
                           j->embd / j->heads);
    const int kv = j->kv_heads > 0 ? j->kv_heads : j->heads;
    if (kv % j->tp && j->tp % kv) {
        /* Megatron's rule: split the kv heads over tp, or replicate each over tp / kv ranks. */
        char fits[256] = "";
        for (int t = 1; t <= j->heads; t++)
            if (j->heads % t == 0 && (kv % t == 0 || t % kv == 0)) {
                size_t used = strlen(fits);
                snprintf(fits + used, sizeof fits - used, "%s%d", used ? ", " : "", t);
            }
        return job_fail_at(j, KEYS("parallel.tp", "parallel"),
                           "parallel.tp = %d does not fit model.kv_heads = %d: tp must divide "
                           "the kv heads or be a multiple of them; tp values that work: %s",
                           j->tp, kv, fits);
    }
    if (j->pp > j->layers)
        return job_fail_at(j, KEYS("parallel.pp", "parallel"),
                           "parallel.pp = %d is more than model.layers = %d (every pipeline stage "
                           "needs a layer)",
                           j->pp, j->layers);
    if (j->top_k > j->vocab)
        return job_fail_at(j, KEYS("generate.top_k", "generate"),
                           "generate.top_k = %d is more than model.vocab = %d", j->top_k, j->vocab);
    if (j->prompt_len > 0 && (long)j->prompt_len + j->new_tokens > j->ctx) {
        const char *const *keys = job_key_find(j, "generate.new_tokens")
                                      ? KEYS("generate.new_tokens")
                                      : job_input_keys(j);
        return job_fail_at(j, keys, "prompt of %d tokens plus %d new tokens exceeds model.ctx = %d",
                           j->prompt_len, j->new_tokens, j->ctx);
    }
    for (long i = 0; j->tokens && i < (long)j->batch * j->prompt_len; i++)
        if (j->tokens[i] < 0 || j->tokens[i] >= j->vocab)
            return job_fail_at(j, job_input_keys(j),
                               "input: prompt %ld position %ld: token id %d is not below "
                               "model.vocab = %d",
                               i / j->prompt_len, i % j->prompt_len, j->tokens[i], j->vocab);
    for (int i = 0; i < j->n_activations; i++) {
        long layer = job_activation_layer(j->activations[i]);
        if (layer >= j->layers)
            return job_fail_at(j, KEYS("record.activations", "record"),
                               "record.activations: '%s' names layer %ld but the model has %d "
                               "layers (0 to %d)",
                               j->activations[i], layer, j->layers, j->layers - 1);
    }
    return STATUS_OK;
}
