/* Serial reader of run files for the tools (see runread.h). */
#include "io/runread.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "base/check.h"
#include "io/h5util.h"

static int attr_int(hid_t obj, const char *name, int fallback) {
    long long v;
    return h5_attr_read_long(obj, name, &v) == 0 ? (int)v : fallback;
}

static double attr_num(hid_t obj, const char *name) {
    double v;
    return h5_attr_read_double(obj, name, &v) == 0 ? v : NAN;
}

static void mesh_read(run_data *run) {
    run->ranks = xcalloc((unsigned long)run->world_size, sizeof(run_rank));
    for (int r = 0; r < run->world_size; r++)
        run->ranks[r].rank = r;
    if (!h5_exists(run->file, "mesh")) return;
    hid_t host = h5_string_type(64);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(run_rank));
    H5Tinsert(t, "rank", HOFFSET(run_rank, rank), H5T_NATIVE_INT);
    H5Tinsert(t, "dp_rank", HOFFSET(run_rank, dp_rank), H5T_NATIVE_INT);
    H5Tinsert(t, "pp_rank", HOFFSET(run_rank, pp_rank), H5T_NATIVE_INT);
    H5Tinsert(t, "tp_rank", HOFFSET(run_rank, tp_rank), H5T_NATIVE_INT);
    H5Tinsert(t, "device", HOFFSET(run_rank, device), H5T_NATIVE_INT);
    H5Tinsert(t, "host", HOFFSET(run_rank, host), host);
    H5Tinsert(t, "clock_offset", HOFFSET(run_rank, clock_offset), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "clock_uncertainty", HOFFSET(run_rank, clock_uncertainty), H5T_NATIVE_DOUBLE);
    hid_t d;
    H5E_BEGIN_TRY { d = H5Dopen2(run->file, "mesh", H5P_DEFAULT); }
    H5E_END_TRY;
    hid_t space = d >= 0 ? H5Dget_space(d) : -1;
    if (space >= 0 && H5Sget_simple_extent_npoints(space) == run->world_size) {
        herr_t err;
        H5E_BEGIN_TRY { err = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, run->ranks); }
        H5E_END_TRY;
        if (err < 0) memset(run->ranks, 0, (size_t)run->world_size * sizeof(run_rank));
    }
    if (space >= 0) H5Sclose(space);
    if (d >= 0) H5Dclose(d);
    H5Tclose(t);
    H5Tclose(host);
}

/* Every rank's events table. A table that cannot be read as events (rows of an older layout)
 * counts as empty; one that is not a dataset at all is a damaged file: STATUS_BAD_INPUT. */
static int events_read(run_data *run) {
    run->n_events = xcalloc((unsigned long)run->world_size, sizeof(long));
    run->events = xcalloc((unsigned long)run->world_size, sizeof(timing_event *));
    hid_t t = h5_timing_event_type();
    int rc = STATUS_OK;
    for (int r = 0; r < run->world_size && rc == STATUS_OK; r++) {
        char path[64];
        snprintf(path, sizeof path, "timings/rank_%05d/events", r);
        if (!h5_exists(run->file, path)) continue;
        hid_t d;
        H5E_BEGIN_TRY { d = H5Dopen2(run->file, path, H5P_DEFAULT); }
        H5E_END_TRY;
        if (d < 0) {
            error_set("%s: /%s is not a dataset (damaged or foreign run file)", run->path, path);
            rc = STATUS_BAD_INPUT;
            continue;
        }
        hid_t space = H5Dget_space(d);
        hssize_t n = H5Sget_simple_extent_npoints(space);
        if (n > 0) {
            run->events[r] = xcalloc((unsigned long)n, sizeof(timing_event));
            herr_t err;
            H5E_BEGIN_TRY { err = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, run->events[r]); }
            H5E_END_TRY;
            run->n_events[r] = err < 0 ? 0 : (long)n;
        }
        H5Sclose(space);
        H5Dclose(d);
    }
    H5Tclose(t);
    return rc;
}

static void metrics_read(run_data *run) {
    run_headline *m = &run->metrics;
    if (h5_object_type(run->file, "metrics") != H5I_GROUP) return; /* run_file_open checked */
    hid_t g = H5Gopen2(run->file, "metrics", H5P_DEFAULT);
    H5_CHECK(g);
    m->present = 1;
    m->iterations = attr_int(g, "iterations", 0);
    m->latency_mean = attr_num(g, "latency_mean");
    m->latency_p50 = attr_num(g, "latency_p50");
    m->latency_p90 = attr_num(g, "latency_p90");
    m->latency_p99 = attr_num(g, "latency_p99");
    m->ttft_mean = attr_num(g, "ttft_mean");
    m->ttft_p50 = attr_num(g, "ttft_p50");
    m->ttft_p90 = attr_num(g, "ttft_p90");
    m->ttft_p99 = attr_num(g, "ttft_p99");
    m->tpot_mean = attr_num(g, "tpot_mean");
    m->tpot_p50 = attr_num(g, "tpot_p50");
    m->tpot_p90 = attr_num(g, "tpot_p90");
    m->tpot_p99 = attr_num(g, "tpot_p99");
    m->itl_mean = attr_num(g, "itl_mean");
    m->itl_p50 = attr_num(g, "itl_p50");
    m->itl_p90 = attr_num(g, "itl_p90");
    m->itl_p99 = attr_num(g, "itl_p99");
    m->tokens_per_s = attr_num(g, "tokens_per_s");
    m->requests_per_s = attr_num(g, "requests_per_s");
    m->peak_memory_bytes_max = attr_num(g, "peak_memory_bytes_max");
    m->prefill_seconds = attr_num(g, "prefill_seconds");
    m->decode_seconds = attr_num(g, "decode_seconds");
    m->cold_start_seconds = attr_num(g, "cold_start_seconds");
    long long v;
    m->generated_tokens = h5_attr_read_long(g, "generated_tokens", &v) == 0 ? v : 0;
    m->requests = h5_attr_read_long(g, "requests", &v) == 0 ? v : 0;
    H5Gclose(g);
}

/* The kinds of the top-level objects of a run file (docs/schema.md), when present. */
static const struct {
    const char *path;
    H5I_type_t type;
} run_layout[] = {
    {"mesh", H5I_DATASET},      {"output", H5I_GROUP},  {"output/tokens", H5I_DATASET},
    {"activations", H5I_GROUP}, {"timings", H5I_GROUP}, {"metrics", H5I_GROUP},
};

/* "1" or "1 to N": the format versions this build reads, for messages. */
static const char *run_versions_text(void) {
    static char text[32];
    if (RUN_FORMAT_VERSION == 1)
        snprintf(text, sizeof text, "1");
    else
        snprintf(text, sizeof text, "1 to %d", RUN_FORMAT_VERSION);
    return text;
}

/* The identity check of run_file_open on an open file; error_message() says why not. */
static int run_file_check(hid_t file, const char *path, int *complete) {
    char *format = h5_attr_read_string_alloc(file, "format");
    if (!format || strcmp(format, RUN_FORMAT) != 0) {
        if (format)
            error_set("%s: not a tripar run file (root attribute format is \"%.64s\", expected "
                      "\"%s\")",
                      path, format, RUN_FORMAT);
        else if (h5_attr_exists(file, "format"))
            error_set("%s: not a tripar run file (root attribute format is not a string, "
                      "expected \"%s\")",
                      path, RUN_FORMAT);
        else
            error_set("%s: not a tripar run file (no root attribute format, expected \"%s\")", path,
                      RUN_FORMAT);
        free(format);
        return STATUS_BAD_INPUT;
    }
    free(format);
    long long version = 0;
    if (h5_attr_read_long(file, "format_version", &version) != 0) {
        error_set("%s: no integer root attribute format_version (this tripar %s reads run files "
                  "of format_version %s)",
                  path, TRIPAR_VERSION, run_versions_text());
        return STATUS_BAD_INPUT;
    }
    if (version < 1 || version > RUN_FORMAT_VERSION) {
        error_set("%s: run file format_version %lld%s; this tripar %s reads format_version %s",
                  path, version, version > RUN_FORMAT_VERSION ? " (written by a newer tripar)" : "",
                  TRIPAR_VERSION, run_versions_text());
        return STATUS_BAD_INPUT;
    }
    for (size_t i = 0; i < sizeof run_layout / sizeof run_layout[0]; i++) {
        if (!h5_exists(file, run_layout[i].path)) continue;
        if (h5_object_type(file, run_layout[i].path) != run_layout[i].type) {
            error_set("%s: /%s is not a %s (damaged or foreign run file)", path, run_layout[i].path,
                      run_layout[i].type == H5I_GROUP ? "group" : "dataset");
            return STATUS_BAD_INPUT;
        }
    }
    long long done = 0;
    *complete = h5_attr_read_long(file, "complete", &done) == 0 && done == 1;
    return STATUS_OK;
}

hid_t run_file_open(const char *path, int *complete) {
    *complete = 0;
    hid_t file = h5_open_read(path);
    if (file < 0) return -1;
    if (run_file_check(file, path, complete) != STATUS_OK) {
        H5Fclose(file);
        return -1;
    }
    return file;
}

void run_file_warn_incomplete(const char *tool, const char *path) {
    fprintf(stderr,
            "tripar %s: warning: %s is an incomplete run file (complete=0): the run did "
            "not finish; what follows covers only what it wrote\n",
            tool, path);
}

/* The root attributes after run_file_open: the mesh shape and the run's labels. Returns
 * STATUS_BAD_INPUT with error_message() set when they cannot describe a run. */
static int root_read(run_data *run, const char *path) {
    run->format_version = attr_int(run->file, "format_version", 0);
    run->world_size = attr_int(run->file, "world_size", 0);
    if (run->world_size <= 0 || run->world_size > (1 << 24)) {
        error_set("%s: bad world_size attribute (an integer from 1 to %d expected)", path, 1 << 24);
        return STATUS_BAD_INPUT;
    }
    run->dp = attr_int(run->file, "dp", 1);
    run->tp = attr_int(run->file, "tp", 1);
    run->pp = attr_int(run->file, "pp", 1);
    run->microbatches = attr_int(run->file, "microbatches", 1);
    run->overlap = attr_int(run->file, "overlap", 0);
    run->ep = attr_int(run->file, "ep", 1);
    h5_attr_read_string(run->file, "order", run->order, sizeof run->order);
    h5_attr_read_string(run->file, "backend", run->backend, sizeof run->backend);
    h5_attr_read_string(run->file, "precision", run->precision, sizeof run->precision);
    h5_attr_read_string(run->file, "created", run->created, sizeof run->created);
    h5_attr_read_string(run->file, "tripar_version", run->version, sizeof run->version);
    return STATUS_OK;
}

/* Entries of the root attribute hosts, or 0 when it is absent. */
static int hosts_count(hid_t file) {
    hid_t hosts = -1;
    H5E_BEGIN_TRY { hosts = H5Aopen(file, "hosts", H5P_DEFAULT); }
    H5E_END_TRY;
    if (hosts < 0) return 0;
    hid_t space = H5Aget_space(hosts);
    int n = (int)H5Sget_simple_extent_npoints(space);
    H5Sclose(space);
    H5Aclose(hosts);
    return n;
}

int run_data_load(run_data *run, const char *path) {
    memset(run, 0, sizeof *run);
    snprintf(run->path, sizeof run->path, "%s", path);
    run->file = run_file_open(path, &run->complete);
    if (run->file < 0) return STATUS_BAD_INPUT;
    if (root_read(run, path) != STATUS_OK) {
        H5Fclose(run->file);
        run->file = -1;
        return STATUS_BAD_INPUT;
    }
    run->n_hosts = hosts_count(run->file);
    mesh_read(run);
    if (events_read(run) != STATUS_OK) {
        run_data_free(run);
        return STATUS_BAD_INPUT;
    }
    metrics_read(run);
    run->iterations_done = xmalloc((size_t)run->world_size * sizeof(int));
    for (int r = 0; r < run->world_size; r++) {
        run->iterations_done[r] = -1;
        for (long i = 0; i < run->n_events[r]; i++) {
            const timing_event *e = &run->events[r][i];
            if (e->phase != PHASE_ITERATION) continue;
            int done = e->iteration >= 0 ? e->iteration + 1 : 0;
            if (done > run->iterations_done[r]) run->iterations_done[r] = done;
        }
    }
    if (h5_object_type(run->file, "timings") == H5I_GROUP) {
        hid_t g = H5Gopen2(run->file, "timings", H5P_DEFAULT);
        H5_CHECK(g);
        if (h5_attr_read_string(g, "level", run->timings_level, sizeof run->timings_level) != 0)
            run->timings_level[0] = '\0';
        H5Gclose(g);
    }
    return STATUS_OK;
}

int run_event_counts(const run_data *run, int rank, const timing_event *e, int measured_only) {
    const int done = run->iterations_done ? run->iterations_done[rank] : -1;
    if (done >= 0 && e->iteration >= done) return 0; /* an iteration cut before its end */
    return !measured_only || e->iteration >= 0;
}

int run_measured_only(const run_data *run) {
    for (int r = 0; r < run->world_size; r++)
        for (long i = 0; i < run->n_events[r]; i++)
            if (run->events[r][i].iteration >= 0 && run_event_counts(run, r, &run->events[r][i], 1))
                return 1;
    return 0;
}

int run_layer_timed(const run_data *run) {
    if (run->timings_level[0]) return !strcmp(run->timings_level, "layer");
    for (int r = 0; r < run->world_size; r++)
        for (long i = 0; i < run->n_events[r]; i++)
            if (run->events[r][i].layer >= 0) return 1;
    return 0;
}

void run_data_free(run_data *run) {
    if (run->events)
        for (int r = 0; r < run->world_size; r++)
            free(run->events[r]);
    free(run->events);
    free(run->n_events);
    free(run->iterations_done);
    free(run->ranks);
    if (run->file > 0) H5Fclose(run->file);
    memset(run, 0, sizeof *run);
    run->file = -1;
}

void run_data_label(const run_data *run, char *out, size_t len) {
    char ep[16] = "";
    if (run->ep > 1) snprintf(ep, sizeof ep, " ep%d", run->ep);
    snprintf(out, len, "dp%d-tp%d-pp%d m%d%s%s", run->dp, run->tp, run->pp, run->microbatches,
             run->overlap ? " overlap" : "", ep);
}

/* Keys under model: that say how a model ran rather than which model it is. */
static const char *const model_run_keys[] = {"model.precision", "model.int8_group",
                                             "model.quantize_head", "model.kv_cache",
                                             "model.kv_block",  "model.kv_dtype"};

static char *text_copy(const char *text) {
    size_t n = strlen(text) + 1;
    char *copy = xmalloc(n);
    memcpy(copy, text, n);
    return copy;
}

static void model_pair_add(run_model *m, const char *key, const char *value) {
    for (size_t i = 0; i < sizeof model_run_keys / sizeof model_run_keys[0]; i++)
        if (!strcmp(key, model_run_keys[i])) return;
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        m->keys = realloc(m->keys, (size_t)m->cap * sizeof(char *));
        m->values = realloc(m->values, (size_t)m->cap * sizeof(char *));
        CHECK(m->keys && m->values, "out of memory");
    }
    m->keys[m->n] = text_copy(key);
    m->values[m->n] = text_copy(value);
    m->n++;
    if (!strcmp(key, "model.checkpoint")) m->checkpoint = 1;
}

/* Calls visit for every scalar value of the job text with its dotted path of mapping keys
 * ("generate.new_tokens"; sequence levels add nothing to the path, in_sequence says one was
 * crossed) until visit returns non-zero. An event parser rather than a document load: the text
 * is read once, at any depth, in bounded memory; nesting deeper than tripar ever writes ends
 * the walk. Returns STATUS_OK, or STATUS_BAD_INPUT on a YAML error (what was visited stays). */
enum { JOB_WALK_DEPTH_MAX = 8 };
typedef int (*job_scalar_visit)(void *user, const char *path, int in_sequence, const char *value);
static int job_text_walk(const char *text, job_scalar_visit visit, void *user) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return STATUS_BAD_INPUT;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    struct {
        int is_map, want_key;
        char key[64];
    } stack[JOB_WALK_DEPTH_MAX];
    int depth = 0, rc = STATUS_OK, done = 0;
    while (!done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = STATUS_BAD_INPUT;
            break;
        }
        int value_done = 0; /* a scalar or a closed collection filled the pending map value */
        switch (ev.type) {
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (depth == JOB_WALK_DEPTH_MAX) {
                done = 1;
                break;
            }
            stack[depth].is_map = ev.type == YAML_MAPPING_START_EVENT;
            stack[depth].want_key = 1;
            stack[depth].key[0] = '\0';
            depth++;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            depth--;
            value_done = 1;
            break;
        case YAML_SCALAR_EVENT: {
            const char *v = (const char *)ev.data.scalar.value;
            if (depth > 0 && stack[depth - 1].is_map && stack[depth - 1].want_key) {
                snprintf(stack[depth - 1].key, sizeof stack[depth - 1].key, "%s", v);
                stack[depth - 1].want_key = 0;
                break;
            }
            char path[512] = "";
            size_t used = 0;
            int in_sequence = 0;
            for (int d = 0; d < depth && used < sizeof path; d++) {
                in_sequence |= !stack[d].is_map;
                if (stack[d].is_map)
                    used += (size_t)snprintf(path + used, sizeof path - used, "%s%s",
                                             used ? "." : "", stack[d].key);
            }
            done = visit(user, path, in_sequence, v);
            value_done = 1;
            break;
        }
        case YAML_ALIAS_EVENT: /* tripar writes none; one still fills a value */
            value_done = 1;
            break;
        case YAML_STREAM_END_EVENT:
        case YAML_DOCUMENT_END_EVENT: done = 1; break;
        default: break;
        }
        if (value_done && depth > 0 && stack[depth - 1].is_map) stack[depth - 1].want_key = 1;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* The scalars under model:, keyed by their dotted path. */
static int model_pair_visit(void *user, const char *path, int in_sequence, const char *value) {
    (void)in_sequence;
    if (!strncmp(path, "model.", 6)) model_pair_add(user, path, value);
    return 0;
}

typedef struct {
    const char *key;
    char *out;
    size_t len;
    int found;
} job_scalar_query;

static int job_scalar_visit_one(void *user, const char *path, int in_sequence, const char *value) {
    job_scalar_query *q = user;
    if (in_sequence || strcmp(path, q->key)) return 0;
    snprintf(q->out, q->len, "%s", value);
    q->found = 1;
    return 1;
}

int run_job_scalar(const char *job_text, const char *key, char *out, size_t len) {
    job_scalar_query q = {key, out, len, 0};
    (void)job_text_walk(job_text, job_scalar_visit_one, &q);
    return q.found ? 0 : -1;
}

/* The runner notes a checkpoint's shape in a comment of the job text ("# from the checkpoint:
 * layers 2, heads 2, ..., kv_heads 2, arch llama"), which a YAML parser skips: its "name value"
 * items become model.checkpoint_shape.<name> pairs, and its arch becomes model.arch when the
 * job did not set that key itself. */
static void model_checkpoint_shape_parse(const char *text, run_model *m) {
    const char *p = strstr(text, "# from the checkpoint:");
    if (!p) return;
    p += strlen("# from the checkpoint:");
    while (*p && *p != '\n') {
        char name[32], value[32];
        int used = 0;
        if (sscanf(p, " %31[a-z_] %31[A-Za-z0-9_.-]%n", name, value, &used) != 2) break;
        char key[96];
        if (!strcmp(name, "arch"))
            snprintf(key, sizeof key, "model.arch");
        else
            snprintf(key, sizeof key, "model.checkpoint_shape.%s", name);
        if (run_model_key(m, key) == NULL) model_pair_add(m, key, value);
        p += used;
        if (*p == ',') p++;
    }
}

const char *run_model_key(const run_model *m, const char *name) {
    char synthetic[64], noted[64];
    snprintf(synthetic, sizeof synthetic, "model.synthetic.%s", name);
    snprintf(noted, sizeof noted, "model.checkpoint_shape.%s", name);
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->keys[i], synthetic) || !strcmp(m->keys[i], noted) ||
            !strcmp(m->keys[i], name))
            return m->values[i];
    return NULL;
}

int run_model_read(hid_t file, const char *path, run_model *m) {
    memset(m, 0, sizeof *m);
    char *job = h5_attr_read_string_alloc(file, "job");
    if (!job) {
        error_set("%s: no root attribute job (the resolved job), so the model it ran is unknown",
                  path);
        return STATUS_BAD_INPUT;
    }
    int rc = job_text_walk(job, model_pair_visit, m);
    if (rc == STATUS_OK) model_checkpoint_shape_parse(job, m);
    free(job);
    if (rc != STATUS_OK || m->n == 0) {
        error_set("%s: the root attribute job has no readable model section", path);
        run_model_free(m);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

void run_model_free(run_model *m) {
    for (int i = 0; i < m->n; i++) {
        free(m->keys[i]);
        free(m->values[i]);
    }
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}

static const char *model_value(const run_model *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->keys[i], key)) return m->values[i];
    return NULL;
}

/* Two recorded checkpoint paths name the same weights: the same file, or the same file name. */
static int checkpoint_paths_match(const char *a, const char *b) {
    if (!strcmp(a, b)) return 1;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino)
        return 1;
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    return !strcmp(na ? na + 1 : a, nb ? nb + 1 : b);
}

int run_model_same(const run_model *a, const run_model *b, char *why, size_t len) {
    if (a->checkpoint != b->checkpoint) {
        snprintf(why, len, "%s vs %s", a->checkpoint ? "a checkpoint" : "synthetic weights",
                 b->checkpoint ? "a checkpoint" : "synthetic weights");
        return 0;
    }
    for (int i = 0; i < a->n; i++) {
        const char *vb = model_value(b, a->keys[i]);
        if (!vb) continue; /* a key one tripar version records and another does not */
        int same = !strcmp(a->keys[i], "model.checkpoint")
                       ? checkpoint_paths_match(a->values[i], vb)
                       : !strcmp(a->values[i], vb);
        if (!same) {
            snprintf(why, len, "%s: %s vs %s", a->keys[i], a->values[i], vb);
            return 0;
        }
    }
    return 1;
}
