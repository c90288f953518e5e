/* The cluster file of `tripar plan`: nodes, devices, their ceilings and the network tiers, read
 * with the job files' libyaml tree (job/job_tree.h) so every error names file:line and the
 * allowed keys or units (docs/planner.md "Cluster files"). Ceilings and tiers may come from
 * tripar's own measurements: a run with bench.roofline, a commbench --tiers file. */
#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "io/h5util.h"
#include "io/runread.h"
#include "job/job_tree.h"
#include "analysis/plan.h"

static const char *const TOP_KEYS[] = {"name",           "nodes",    "devices_per_node",
                                       "cores_per_node", "node_gbs", "device",
                                       "network",        "nccl",     NULL};
static const char *const NCCL_KEYS[] = {"arch", "intra", "nvls", "cpu", NULL};
static const char *const GPU_ARCHS[] = {"volta", "ampere", "hopper", "blackwell", NULL};
static const char *const INTRA_LINKS[] = {"nvlink", "pci", NULL};
static const char *const CPUS[] = {"intel", "amd", NULL};
static const char *const BOOLS[] = {"false", "true", NULL};
static const char *const DEVICE_KEYS[] = {"memory",  "gflops",  "gbs",        "from",
                                          "llc_mib", "llc_gbs", "efficiency", NULL};
static const char *const EFFICIENCY_KEYS[] = {"sms",
                                              "gemm_tile",
                                              "split_k_max",
                                              "gemm_ceiling",
                                              "fp32_fraction",
                                              "attention_ceiling",
                                              "attention_half_ctx",
                                              "hbm_fraction",
                                              "launch",
                                              "graph_launch",
                                              "step_overhead",
                                              "collective_launch",
                                              NULL};
/* the output tiles cuBLAS and CUTLASS ship for bf16/fp16 tensor-core GEMMs on Ampere and
 * Hopper (M x N) */
static const char *const GEMM_TILES[] = {"64x64",   "64x128",  "128x64", "128x128",
                                         "128x256", "256x128", NULL};
static const char *const NETWORK_KEYS[] = {"intra", "inter", "inter2", NULL};
static const char *const INTRA_KEYS[] = {"alpha", "beta", "efficiency", "from", NULL};
static const char *const TIER_KEYS[] = {"alpha",          "beta", "efficiency",
                                        "links_per_node", "from", NULL};
static const char *const INTER2_KEYS[] = {"alpha",          "beta",        "efficiency",
                                          "links_per_node", "group_nodes", NULL};

/* A unit a number may carry, and what it multiplies by. */
typedef struct {
    const char *name;
    double scale;
} unit;

static const unit BYTES_UNITS[] = {
    {"B", 1},           {"KB", 1e3},           {"MB", 1e6},
    {"GB", 1e9},        {"TB", 1e12},          {"KiB", 1024.0},
    {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    {NULL, 0}};
static const unit SECONDS_UNITS[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {NULL, 0}};
static const unit RATE_UNITS[] = {{"B/s", 1},          {"KB/s", 1e3},       {"MB/s", 1e6},
                                  {"GB/s", 1e9},       {"TB/s", 1e12},      {"GiB/s", 1073741824.0},
                                  {"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8}, {"Tbit/s", 1e12 / 8},
                                  {"Mb/s", 1e6 / 8},   {"Gb/s", 1e9 / 8},   {NULL, 0}};

static void units_list(const unit *u, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; u[i].name && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", u[i].name);
}

void plan_keys_list(const char *const *keys, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; keys[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", keys[i]);
}

int plan_section_check(const jnode *m, const jnode *at, const char *section,
                         const char *const *allowed) {
    char list[256], buf[128];
    plan_keys_list(allowed, list, sizeof list);
    if (!m || m->type != JNODE_MAP)
        return jnode_fail(m ? m : at, "%s must be a mapping with keys %s; got %s", section, list,
                          jnode_describe(m, buf, sizeof buf));
    for (int i = 0; i < m->n; i++) {
        int known = 0;
        for (int k = 0; allowed[k]; k++)
            known |= !strcmp(m->keys[i]->value, allowed[k]);
        if (!known)
            return jnode_fail(m->keys[i], "unknown key '%s' in %s; allowed: %s", m->keys[i]->value,
                              section, list);
    }
    return STATUS_OK;
}

/* A number with an optional unit from units (NULL: none allowed), positive unless zero_ok;
 * `what` names it in messages ("device.memory"). */
static int number_read(const jnode *m, const jnode *at, const char *key, const char *what,
                       const unit *units, int required, double *out) {
    const jnode *k = NULL, *v = jnode_get(m, key, &k);
    char ulist[256] = "", buf[128];
    if (units) units_list(units, ulist, sizeof ulist);
    if (!v) {
        if (!required) return STATUS_OK;
        return jnode_fail(at, "%s is missing; it is required (a number%s%s)", what,
                          units ? " with an optional unit: " : "", ulist);
    }
    if (v->type != JNODE_SCALAR || v->tag == JTAG_BOOL || v->tag == JTAG_STR)
        return jnode_fail(v, "%s: %s is not a number", what, jnode_describe(v, buf, sizeof buf));
    char *end;
    double x = strtod(v->value, &end);
    while (isspace((unsigned char)*end))
        end++;
    double scale = 1;
    if (*end) {
        int found = 0;
        for (int i = 0; units && units[i].name; i++)
            if (!strcmp(end, units[i].name)) scale = units[i].scale, found = 1;
        if (!found)
            return units ? jnode_fail(v,
                                      "%s: %s has an unknown unit; allowed units: %s (or none: "
                                      "the base unit)",
                                      what, jnode_describe(v, buf, sizeof buf), ulist)
                         : jnode_fail(v, "%s: %s is not a number", what,
                                      jnode_describe(v, buf, sizeof buf));
    }
    if (end == v->value || !isfinite(x) || x <= 0)
        return jnode_fail(v, "%s: %s must be a positive number", what,
                          jnode_describe(v, buf, sizeof buf));
    *out = x * scale;
    return STATUS_OK;
}

static int int_read(const jnode *m, const jnode *at, const char *key, const char *what, int *out) {
    const jnode *v = jnode_get(m, key, NULL);
    double x = 0;
    char *end = NULL;
    /* A plain number is parsed here, so that zero and negatives too get the whole range in the
     * message below; anything else (missing, not a number, a unit) gets number_read's. */
    const int plain = v && v->type == JNODE_SCALAR && v->tag != JTAG_BOOL && v->tag != JTAG_STR &&
                      (x = strtod(v->value, &end), end != v->value && !*end);
    if (!plain) {
        int rc = number_read(m, at, key, what, NULL, 1, &x);
        if (rc) return rc;
    }
    if (!(x >= 1 && x == floor(x) && x <= 1e7)) {
        char buf[128];
        return jnode_fail(v, "%s: %s must be a whole number from 1 to 10000000", what,
                          jnode_describe(v, buf, sizeof buf));
    }
    *out = (int)x;
    return STATUS_OK;
}

/* A path a cluster file names, relative to the cluster file's folder. */
static void path_beside(const char *cluster_path, const char *name, char *out, size_t len) {
    const char *slash = strrchr(cluster_path, '/');
    if (name[0] == '/' || !slash)
        snprintf(out, len, "%s", name);
    else
        snprintf(out, len, "%.*s/%s", (int)(slash - cluster_path), cluster_path, name);
}

static int tier_from_commbench(const jnode *from, const char *cluster_path, const char *tier,
                               plan_tier *t);

static int tier_read(const jnode *network, const jnode *at, plan_tier_kind kind, int required,
                     const char *cluster_path, plan_cluster *c) {
    const char *name = plan_tier_name(kind);
    const jnode *key = NULL, *m = jnode_get(network, name, &key);
    char what[64];
    if (!m) {
        if (!required) return STATUS_OK;
        return jnode_fail(at,
                          "network.%s is missing; it is required %s (keys alpha, beta, "
                          "efficiency, or from: COMMBENCH.h5)",
                          name, kind == PLAN_TIER_INTRA ? "always" : "when nodes > 1");
    }
    snprintf(what, sizeof what, "network.%s", name);
    int rc = plan_section_check(m, key, what,
                           kind == PLAN_TIER_INTER2  ? INTER2_KEYS
                           : kind == PLAN_TIER_INTER ? TIER_KEYS
                                                     : INTRA_KEYS);
    plan_tier *t = &c->tier[kind];
    const jnode *from = kind == PLAN_TIER_INTER2 ? NULL : jnode_get(m, "from", NULL);
    if (!rc && from) {
        const jnode *given = jnode_get(m, "alpha", NULL);
        if (!given) given = jnode_get(m, "beta", NULL);
        if (given)
            return jnode_fail(given,
                              "network.%s.from gives alpha and beta; give them or from, "
                              "not both",
                              name);
        rc = tier_from_commbench(from, cluster_path, name, t);
    }
    snprintf(what, sizeof what, "network.%s.alpha", name);
    if (!rc && !from) rc = number_read(m, key, "alpha", what, SECONDS_UNITS, 1, &t->alpha);
    snprintf(what, sizeof what, "network.%s.beta", name);
    if (!rc && !from) rc = number_read(m, key, "beta", what, RATE_UNITS, 1, &t->beta);
    snprintf(what, sizeof what, "network.%s.efficiency", name);
    t->efficiency = 1;
    if (!rc) rc = number_read(m, key, "efficiency", what, NULL, 0, &t->efficiency);
    if (!rc && t->efficiency > 1)
        rc = jnode_fail(jnode_get(m, "efficiency", NULL),
                        "%s = %g must be a fraction of the link, in (0, 1]", what, t->efficiency);
    t->links_per_node = 0;
    if (!rc && kind != PLAN_TIER_INTRA && jnode_get(m, "links_per_node", NULL)) {
        snprintf(what, sizeof what, "network.%s.links_per_node", name);
        rc = int_read(m, key, "links_per_node", what, &t->links_per_node);
    }
    if (!rc && kind == PLAN_TIER_INTER2) {
        snprintf(what, sizeof what, "network.inter2.group_nodes");
        rc = int_read(m, key, "group_nodes", what, &c->inter2_group_nodes);
    }
    t->present = rc == STATUS_OK;
    return rc;
}

/* device.from: RUN.h5 (relative to the cluster file's folder): the ceilings the run measured
 * with bench.roofline (/metrics/roofline, docs/schema.md): the better of the two sgemm passes
 * and the stream bandwidth, as `tripar report --roofline` reads them. */
static int ceilings_from_run(const jnode *from, const char *cluster_path, double *gflops,
                             double *gbs) {
    char buf[128], path[2048];
    if (from->type != JNODE_SCALAR || !from->value[0])
        return jnode_fail(from, "device.from must name a run file; got %s",
                          jnode_describe(from, buf, sizeof buf));
    path_beside(cluster_path, from->value, path, sizeof path);
    char why[PATH_WHY_MAX];
    if (path_check_input(path, why, sizeof why) != 0)
        return jnode_fail(from, "device.from: %s %s", path, why);
    run_data run;
    if (run_data_load(&run, path) != STATUS_OK) {
        snprintf(buf, sizeof buf, "%.120s", error_message());
        return jnode_fail(from, "device.from: %s", buf);
    }
    double before = NAN, after = NAN, stream = NAN;
    int ok = h5_exists(run.file, "/metrics/roofline");
    if (ok) {
        hid_t g = H5Gopen2(run.file, "/metrics/roofline", H5P_DEFAULT);
        ok = g >= 0 && h5_attr_read_double(g, "sgemm_gflops_before", &before) == 0 &&
             h5_attr_read_double(g, "stream_gbs", &stream) == 0;
        if (g >= 0 && h5_attr_read_double(g, "sgemm_gflops_after", &after) != 0) after = before;
        if (g >= 0) H5Gclose(g);
    }
    run_data_free(&run);
    if (!ok || !(before > 0) || !(stream > 0))
        return jnode_fail(from,
                          "device.from: %s records no ceilings (/metrics/roofline); run it "
                          "with bench.roofline: true",
                          path);
    *gflops = after > before ? after : before;
    *gbs = stream;
    return STATUS_OK;
}

/* One row of /commbench/tiers as the planner reads it (docs/schema.md "The commbench file"). */
typedef struct {
    char tier[8];
    double alpha_s, beta_bytes_s;
} tier_row;

/* network.TIER.from: COMMBENCH.h5: alpha and beta fitted by `tripar commbench --tiers`. */
static int tier_from_commbench(const jnode *from, const char *cluster_path, const char *tier,
                               plan_tier *t) {
    char buf[160], path[2048];
    if (from->type != JNODE_SCALAR || !from->value[0])
        return jnode_fail(from, "network.%s.from must name a commbench file; got %s", tier,
                          jnode_describe(from, buf, sizeof buf));
    path_beside(cluster_path, from->value, path, sizeof path);
    char why[PATH_WHY_MAX];
    if (path_check_input(path, why, sizeof why) != 0)
        return jnode_fail(from, "network.%s.from: %s %s", tier, path, why);
    hid_t f = h5_open_read(path);
    if (f < 0) {
        snprintf(buf, sizeof buf, "%.150s", error_message());
        return jnode_fail(from, "network.%s.from: %s", tier, buf);
    }
    char format[32] = "";
    h5_attr_read_string(f, "format", format, sizeof format);
    int rc = STATUS_OK, found = 0;
    if (strcmp(format, "tripar-commbench") || !h5_exists(f, "/commbench/tiers")) {
        rc = jnode_fail(from,
                        "network.%s.from: %s is not a commbench file of --tiers (no "
                        "/commbench/tiers)",
                        tier, path);
    } else {
        hid_t str = h5_string_type(sizeof((tier_row *)0)->tier);
        hid_t mem = H5Tcreate(H5T_COMPOUND, sizeof(tier_row));
        H5Tinsert(mem, "tier", HOFFSET(tier_row, tier), str);
        H5Tinsert(mem, "alpha_s", HOFFSET(tier_row, alpha_s), H5T_NATIVE_DOUBLE);
        H5Tinsert(mem, "beta_bytes_s", HOFFSET(tier_row, beta_bytes_s), H5T_NATIVE_DOUBLE);
        int ndims;
        hsize_t dims[8];
        long count = 0;
        tier_row *rows = h5_dataset_read_all(f, "/commbench/tiers", mem, &ndims, dims, &count);
        for (long i = 0; rows && i < count && !found; i++)
            if (!strncmp(rows[i].tier, tier, sizeof rows[i].tier)) {
                t->alpha = rows[i].alpha_s, t->beta = rows[i].beta_bytes_s;
                found = 1;
            }
        free(rows);
        H5Tclose(mem);
        H5Tclose(str);
        if (!found) {
            char attr[32], why[256] = "";
            snprintf(attr, sizeof attr, "absent_%s", tier);
            hid_t d = H5Dopen2(f, "/commbench/tiers", H5P_DEFAULT);
            if (d >= 0) {
                h5_attr_read_string(d, attr, why, sizeof why);
                H5Dclose(d);
            }
            rc = jnode_fail(from, "network.%s.from: %s measured no %s tier%s%s", tier, path, tier,
                            why[0] ? ": " : "", why);
        } else if (!(t->alpha > 0) || !(t->beta > 0) || !isfinite(t->alpha) || !isfinite(t->beta)) {
            /* beta = inf: the fit found no time per byte over the sizes measured, which noise
             * does on a busy machine (an ASan build here); no network streams for free. */
            rc = jnode_fail(from,
                            "network.%s.from: %s fitted alpha %g s and beta %g B/s; the "
                            "planner needs both positive and finite (rerun commbench --tiers "
                            "on a quieter machine, or give alpha and beta)",
                            tier, path, t->alpha, t->beta);
        }
    }
    H5Fclose(f);
    return rc;
}

/* jtree's message for an empty file speaks of job sections; a cluster file says its own. */
static int file_is_blank(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0; /* jtree_load_file reports it */
    int blank = 1, comment = 0, ch;
    while (blank && (ch = fgetc(f)) != EOF) {
        if (ch == '\n')
            comment = 0;
        else if (ch == '#')
            comment = 1;
        else if (!comment && !isspace(ch))
            blank = 0;
    }
    fclose(f);
    return blank;
}

/* One of `names` at key of m (absent: *out keeps its default); *out is its index. */
static int choice_read(const jnode *m, const char *key, const char *what, const char *const *names,
                       int *out) {
    const jnode *v = jnode_get(m, key, NULL);
    if (!v) return STATUS_OK;
    char list[128], buf[128];
    plan_keys_list(names, list, sizeof list);
    if (v->type == JNODE_SCALAR)
        for (int i = 0; names[i]; i++)
            if (!strcmp(v->value, names[i])) {
                *out = i;
                return STATUS_OK;
            }
    return jnode_fail(v, "%s: %s is not allowed; allowed: %s", what,
                      jnode_describe(v, buf, sizeof buf), list);
}

/* The real-valued keys of device.efficiency: a fraction in (0, 1], a positive count, or
 * seconds with a unit. */
typedef enum { EFF_FRACTION, EFF_POSITIVE, EFF_SECONDS } eff_kind;
typedef struct {
    const char *key;
    eff_kind kind;
    size_t offset; /* of the double in plan_gpu_efficiency */
} eff_real;
static const eff_real EFFICIENCY_REALS[] = {
    {"gemm_ceiling", EFF_FRACTION, offsetof(plan_gpu_efficiency, gemm_ceiling)},
    {"fp32_fraction", EFF_FRACTION, offsetof(plan_gpu_efficiency, fp32_fraction)},
    {"attention_ceiling", EFF_FRACTION, offsetof(plan_gpu_efficiency, attn_ceiling)},
    {"attention_half_ctx", EFF_POSITIVE, offsetof(plan_gpu_efficiency, attn_half_ctx)},
    {"hbm_fraction", EFF_FRACTION, offsetof(plan_gpu_efficiency, hbm_fraction)},
    {"launch", EFF_SECONDS, offsetof(plan_gpu_efficiency, launch)},
    {"graph_launch", EFF_SECONDS, offsetof(plan_gpu_efficiency, graph_launch)},
    {"step_overhead", EFF_SECONDS, offsetof(plan_gpu_efficiency, step_overhead)},
    {"collective_launch", EFF_SECONDS, offsetof(plan_gpu_efficiency, collective_launch)},
};

/* device.efficiency: the GPU efficiency models' constants, each with its source in the file
 * (docs/planner.md "GPU efficiency models"); its presence marks the device a GPU. Every key is
 * required: a constant left to a default would hide where it came from. */
static int efficiency_read(const jnode *device, plan_gpu_efficiency *e) {
    const jnode *key = NULL, *m = jnode_get(device, "efficiency", &key);
    if (!m) return STATUS_OK;
    int rc = plan_section_check(m, key, "device.efficiency", EFFICIENCY_KEYS);
    if (rc) return rc;
    if (!jnode_get(m, "gemm_tile", NULL))
        return jnode_fail(key, "device.efficiency.gemm_tile is missing; it is required (64x64, "
                               "64x128, 128x64, 128x128, 128x256, 256x128)");
    int tile = 0;
    rc = int_read(m, key, "sms", "device.efficiency.sms", &e->sms);
    if (!rc) rc = choice_read(m, "gemm_tile", "device.efficiency.gemm_tile", GEMM_TILES, &tile);
    if (!rc) rc = int_read(m, key, "split_k_max", "device.efficiency.split_k_max", &e->split_k_max);
    char what[64];
    for (size_t i = 0; !rc && i < sizeof EFFICIENCY_REALS / sizeof EFFICIENCY_REALS[0]; i++) {
        const eff_real *r = &EFFICIENCY_REALS[i];
        double *out = (double *)((char *)e + r->offset);
        snprintf(what, sizeof what, "device.efficiency.%s", r->key);
        rc = number_read(m, key, r->key, what, r->kind == EFF_SECONDS ? SECONDS_UNITS : NULL, 1,
                         out);
        if (!rc && r->kind == EFF_FRACTION && *out > 1)
            rc = jnode_fail(jnode_get(m, r->key, NULL), "%s = %g must be a fraction, in (0, 1]",
                            what, *out);
    }
    if (rc) return rc;
    sscanf(GEMM_TILES[tile], "%dx%d", &e->tile_m, &e->tile_n);
    e->given = 1;
    return STATUS_OK;
}

/* nccl: what NCCL's tuning model needs beyond the tiers (docs/planner.md "NCCL's choice"). */
static int nccl_read(const jnode *root, plan_nccl *n) {
    const jnode *key = NULL, *m = jnode_get(root, "nccl", &key);
    if (!m) return STATUS_OK;
    int rc = plan_section_check(m, key, "nccl", NCCL_KEYS);
    if (rc) return rc;
    if (!jnode_get(m, "arch", NULL))
        return jnode_fail(key, "nccl.arch is missing; it is required in nccl (volta, ampere, "
                               "hopper, blackwell)");
    int arch = 0, intra = 0, nvls = 0, cpu = 0;
    rc = choice_read(m, "arch", "nccl.arch", GPU_ARCHS, &arch);
    if (!rc) rc = choice_read(m, "intra", "nccl.intra", INTRA_LINKS, &intra);
    if (!rc) rc = choice_read(m, "nvls", "nccl.nvls", BOOLS, &nvls);
    if (!rc) rc = choice_read(m, "cpu", "nccl.cpu", CPUS, &cpu);
    if (!rc && nvls && (arch < PLAN_GPU_HOPPER || intra))
        rc = jnode_fail(jnode_get(m, "nvls", NULL),
                        "nccl.nvls: true needs NVLink SHARP: NVSwitches with hopper or blackwell "
                        "GPUs on nvlink (got %s on %s)",
                        GPU_ARCHS[arch], INTRA_LINKS[intra]);
    if (rc) return rc;
    *n = (plan_nccl){
        .given = 1, .arch = (plan_gpu_arch)arch, .intra_pci = intra, .nvls = nvls, .cpu_amd = cpu};
    return STATUS_OK;
}

static int cluster_walk(const jtree *t, const char *path, plan_cluster *c) {
    const jnode *root = t->root;
    int rc = plan_section_check(root, root, "the cluster file", TOP_KEYS);
    if (rc) return rc;
    const jnode *name = jnode_get(root, "name", NULL);
    char buf[128];
    if (name && name->type != JNODE_SCALAR)
        return jnode_fail(name, "name must be a string; got %s",
                          jnode_describe(name, buf, sizeof buf));
    snprintf(c->name, sizeof c->name, "%s", name ? name->value : "cluster");
    rc = int_read(root, root, "nodes", "nodes", &c->nodes);
    if (!rc)
        rc = int_read(root, root, "devices_per_node", "devices_per_node", &c->devices_per_node);
    if (rc) return rc;
    const jnode *dkey = NULL, *device = jnode_get(root, "device", &dkey);
    if (!device)
        return jnode_fail(root, "device is missing; it is required (keys memory, gflops, gbs)");
    rc = plan_section_check(device, dkey, "device", DEVICE_KEYS);
    if (!rc)
        rc =
            number_read(device, dkey, "memory", "device.memory", BYTES_UNITS, 1, &c->device_memory);
    double gflops = 0, gbs = 0;
    const jnode *from = jnode_get(device, "from", NULL);
    if (!rc && from) {
        const jnode *given = jnode_get(device, "gflops", NULL);
        if (!given) given = jnode_get(device, "gbs", NULL);
        if (given)
            return jnode_fail(given, "device.from gives gflops and gbs; give them or from, "
                                     "not both");
        rc = ceilings_from_run(from, path, &gflops, &gbs);
    }
    if (!rc && !from)
        rc = number_read(device, dkey, "gflops", "device.gflops (GFLOP/s)", NULL, 1, &gflops);
    if (!rc && !from) rc = number_read(device, dkey, "gbs", "device.gbs (GB/s)", NULL, 1, &gbs);
    if (rc) return rc;
    c->peak_flops = gflops * 1e9;
    c->mem_bw = gbs * 1e9;
    /* the last-level cache weights may stay in, and how fast a rank reads them there: both
     * or neither (docs/planner.md "Weights in the cache") */
    const jnode *llc = jnode_get(device, "llc_mib", NULL),
                *llc_gbs = jnode_get(device, "llc_gbs", NULL);
    if (!llc != !llc_gbs)
        return jnode_fail(llc ? llc : llc_gbs,
                          "device.%s needs device.%s too: the cache's size and the bandwidth a "
                          "rank reads weights at from it go together",
                          llc ? "llc_mib" : "llc_gbs", llc ? "llc_gbs" : "llc_mib");
    double llc_mib = 0, llc_read = 0;
    rc = number_read(device, dkey, "llc_mib", "device.llc_mib (MiB)", NULL, 0, &llc_mib);
    if (!rc) rc = number_read(device, dkey, "llc_gbs", "device.llc_gbs (GB/s)", NULL, 0, &llc_read);
    if (rc) return rc;
    rc = efficiency_read(device, &c->gpu);
    if (rc) return rc;
    c->llc_bytes = llc_mib * 1048576.0;
    c->llc_bw = llc_read * 1e9;
    /* CPU nodes: the cores their ranks time-share, and the bandwidth the ranks running at once
     * split (docs/planner.md "Shared nodes"); a GPU node gives neither */
    if (jnode_get(root, "cores_per_node", NULL))
        rc = int_read(root, root, "cores_per_node", "cores_per_node", &c->cores_per_node);
    double node_gbs = 0;
    if (!rc) rc = number_read(root, root, "node_gbs", "node_gbs (GB/s)", NULL, 0, &node_gbs);
    if (!rc && node_gbs > 0 && node_gbs < gbs)
        rc = jnode_fail(jnode_get(root, "node_gbs", NULL),
                        "node_gbs = %g GB/s must be at least device.gbs = %g GB/s: it is what "
                        "the node's running ranks draw together, and one rank alone draws "
                        "device.gbs",
                        node_gbs, gbs);
    if (rc) return rc;
    c->node_bw = node_gbs * 1e9;
    const jnode *nkey = NULL, *network = jnode_get(root, "network", &nkey);
    if (!network)
        return jnode_fail(root, "network is missing; it is required (keys intra, inter, inter2)");
    rc = plan_section_check(network, nkey, "network", NETWORK_KEYS);
    if (!rc) rc = tier_read(network, nkey, PLAN_TIER_INTRA, 1, path, c);
    if (!rc) rc = tier_read(network, nkey, PLAN_TIER_INTER, c->nodes > 1, path, c);
    if (!rc) rc = tier_read(network, nkey, PLAN_TIER_INTER2, 0, path, c);
    if (!rc) rc = nccl_read(root, &c->nccl);
    if (rc) return rc;
    /* a tier a strategy never crosses still needs numbers the cost code can divide by; the
     * copy stays marked absent, so the outputs list only the tiers the file gives */
    if (!c->tier[PLAN_TIER_INTER].present) {
        c->tier[PLAN_TIER_INTER] = c->tier[PLAN_TIER_INTRA];
        c->tier[PLAN_TIER_INTER].present = 0;
    }
    if (!c->tier[PLAN_TIER_INTER2].present) {
        c->tier[PLAN_TIER_INTER2] = c->tier[PLAN_TIER_INTER];
        c->tier[PLAN_TIER_INTER2].present = 0;
    }
    return STATUS_OK;
}

int plan_cluster_load(plan_cluster *c, const char *path) {
    memset(c, 0, sizeof *c);
    if (file_is_blank(path)) {
        error_set("%s: the cluster file is empty; it needs nodes, devices_per_node, device and "
                  "network (docs/planner.md)",
                  path);
        return STATUS_BAD_INPUT;
    }
    jtree t;
    memset(&t, 0, sizeof t);
    int rc = jtree_load_file(&t, path);
    if (rc == STATUS_OK) rc = cluster_walk(&t, path, c);
    jtree_free(&t);
    return rc;
}
