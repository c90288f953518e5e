/* Inside the job loader (job.c, job_keys.c, job_origin.c, job_read.c, job_input.c,
 * job_validate.c): the tables of keys and values, where keys were set, the typed reads of one
 * key and the input section. The call graph among these files has no cycle: job.c walks the
 * sections and calls the others; job_read.c and job_validate.c stand on job_origin.c and
 * job_keys.c, which call no other file of the loader. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "job/job_tree.h"

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

/* A NULL-terminated list of dotted keys, for job_fail_at. */
#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- the vocabulary (job_keys.c); every list is NULL-terminated ------------------------ */

/* Enum values' names, in enum order. */
extern const char *const JOB_NORM_NAMES[],
    *const JOB_ARCH_NAMES[], *const JOB_PRECISION_NAMES[],
                                 *const JOB_KV_CACHE_NAMES[],
                                     *const JOB_KV_DTYPE_NAMES[],
                                         *const JOB_BACKEND_NAMES[],
                                             *const JOB_COMM_NAMES[],
                                                 *const JOB_SAMPLING_NAMES[],
                                                     *const JOB_MPI_TUNING_NAMES[],
                                                         *const JOB_TIMINGS_NAMES[],
                                                             *const JOB_CPU_ISA_NAMES[];
/* The sections, and the keys each allows. */
extern const char *const JOB_SECTION_KEYS[],
    *const JOB_MODEL_KEYS[], *const JOB_SYNTHETIC_KEYS[],
                                 *const JOB_LLAMA_ONLY_KEYS[], *const JOB_MOE_ONLY_KEYS[],
                                     *const JOB_ROPE_SCALING_KEYS[],
                                         *const JOB_BACKEND_KEYS[],
                                             *const JOB_PARALLEL_KEYS[],
                                                 *const JOB_INPUT_KEYS[],
                                                 *const JOB_INPUT_ALL_KEYS[],
                                                     *const JOB_INPUT_SYNTHETIC_KEYS[],
                                                         *const JOB_GENERATE_KEYS[],
                                                             *const JOB_BENCH_KEYS[],
                                                                 *const JOB_RECORD_KEYS[],
    *const JOB_PERPLEXITY_KEYS[];
/* Dotted keys whose --set value is taken verbatim. */
extern const char *const JOB_RAW_KEYS[];

/* "a, b, c" into buf, for messages. */
void job_names_join(const char *const *names, char *buf, size_t size);
/* The layer index of "layer.N.attn" / "layer.N.mlp", -1 for embed, final, logits and all,
 * -2 for anything else. */
long job_activation_layer(const char *name);

/* ---- where keys were set (job_origin.c) ----------------------------------------------- */

/* Notes that the dotted key was set at key_node (a line of the file, or a --set). */
void job_key_note(job *j, const char *key, const jnode *key_node);
/* Where the dotted key was set, or NULL when it took its default. */
const job_key_where *job_key_find(const job *j, const char *key);
/* Reports at the first of the NULL-terminated keys that the command line set (--set,
 * --sweep), else at the first set in the file, else at the file; returns STATUS_BAD_INPUT. */
int job_fail_at(const job *j, const char *const *keys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- typed reads of one key (job_read.c) ---------------------------------------------- */

typedef struct {
    job *j;
    jtree tree;
    char dir[JOB_PATH_MAX]; /* the job file's directory, for relative paths in it */
} job_loader;

/* The value of section.key in map m, noting where it was set; NULL when absent. */
const jnode *job_field(job_loader *L, const jnode *m, const char *section, const char *key,
                       const jnode **key_node);
/* Checks that every key of section m is allowed. A null section counts as empty. */
int job_section_check(const jnode *m, const jnode *m_key, const char *section,
                      const char *const *allowed);
/* The integer v in [lo, hi]; name is the key for messages. */
int job_parse_long(const jnode *v, const char *name, long lo, long hi, long *out);
/* One of names (a NULL-terminated list) as its index. */
int job_parse_enum(const jnode *v, const char *name, const char *const *names, int *out);
/* section.key of map m, read into *out when present (left as it is when absent); each returns
 * STATUS_OK or STATUS_BAD_INPUT with the message pointing at the value. */
int job_get_int(job_loader *L, const jnode *m, const char *section, const char *key, long lo,
                long hi, int *out);
int job_get_u64(job_loader *L, const jnode *m, const char *section, const char *key, uint64_t *out);
/* Above lo (exclusive), or exactly 0 when zero_off (the key's "off"). */
int job_get_float(job_loader *L, const jnode *m, const char *section, const char *key, double lo,
                  int zero_off, float *out);
int job_get_bool(job_loader *L, const jnode *m, const char *section, const char *key, int *out);
int job_get_enum(job_loader *L, const jnode *m, const char *section, const char *key,
                 const char *const *names, int *out);
int job_get_string(job_loader *L, const jnode *m, const char *section, const char *key, char *out,
                   size_t size);
/* A readable file, resolved to an absolute path (JOB_PATH_MAX) as job_read.c describes. */
int job_get_path(job_loader *L, const jnode *m, const char *section, const char *key, char *out);

/* ---- the input section (job_input.c) -------------------------------------------------- */

/* Resolves the one prompt source of section m into tokens or a text. */
int job_walk_input(job_loader *L, const jnode *m, const jnode *m_key);

/* ---- the perplexity section (job_perplexity.c) ---------------------------------------- */

/* perplexity.window and perplexity.chunks, and what scoring a text rules out: new tokens, an
 * input other than one text, an arrival stream. Walked after every other section. */
int job_walk_perplexity(job_loader *L, const jnode *m, const jnode *m_key);
