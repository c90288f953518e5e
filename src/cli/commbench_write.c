/* The commbench HDF5 file (--out), written serially by rank 0, which holds every figure:
 * root attributes, /commbench/ranks and /commbench/axes (where groups run), then either
 * /commbench/results (the collective sweep) or /commbench/tiers and /commbench/tier_samples
 * (--tiers). Layout: docs/benchmarks.md. */
#include <hdf5.h>
#include <stddef.h>
#include <stdio.h>

#include "base/check.h"
#include "cli/commbench.h"
#include "io/h5util.h"

/* One compound field: its name, offset, and a string length or 0 for a native type. */
typedef struct {
    const char *name;
    size_t offset;
    size_t string_len; /* > 0: a fixed string of that size */
    hid_t native;      /* when string_len is 0 */
} cb_field;

static hid_t cb_compound(size_t size, const cb_field *fields, int n) {
    hid_t t = H5Tcreate(H5T_COMPOUND, size);
    H5_CHECK(t);
    for (int i = 0; i < n; i++) {
        hid_t ft = fields[i].string_len ? h5_string_type(fields[i].string_len) : fields[i].native;
        H5_CHECK(H5Tinsert(t, fields[i].name, fields[i].offset, ft));
        if (fields[i].string_len) H5Tclose(ft);
    }
    return t;
}

#define STR(type, field)                                                                           \
    { #field, HOFFSET(type, field), sizeof(((type *)0)->field), 0 }
#define NUM(type, field, native)                                                                   \
    { #field, HOFFSET(type, field), 0, native }

/* Writes n packed rows of a compound type as dataset path (n may be 0). */
static void cb_table_write(hid_t f, const char *path, size_t size, const cb_field *fields,
                           int n_fields, const void *rows, long n) {
    hid_t mtype = cb_compound(size, fields, n_fields), ftype = H5Tcopy(mtype);
    H5_CHECK(H5Tpack(ftype));
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
    hid_t d = H5Dcreate2(f, path, ftype, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(d);
    if (n > 0) H5_CHECK(H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows));
    H5Dclose(d);
    H5Pclose(lcpl);
    H5Sclose(space);
    H5Tclose(ftype);
    H5Tclose(mtype);
}

static void cb_results_write(hid_t f, const cb_bench *b) {
    const cb_field fields[] = {
        STR(cb_row, op),
        STR(cb_row, axis),
        NUM(cb_row, ranks, H5T_NATIVE_INT32),
        NUM(cb_row, size_bytes, H5T_NATIVE_INT64),
        NUM(cb_row, count, H5T_NATIVE_INT64),
        STR(cb_row, type),
        NUM(cb_row, time_us, H5T_NATIVE_DOUBLE),
        NUM(cb_row, algbw_gbs, H5T_NATIVE_DOUBLE),
        NUM(cb_row, busbw_gbs, H5T_NATIVE_DOUBLE),
        NUM(cb_row, wrong, H5T_NATIVE_INT64),
        NUM(cb_row, groups, H5T_NATIVE_INT32),
        NUM(cb_row, groups_crossing, H5T_NATIVE_INT32),
        STR(cb_row, tier),
    };
    cb_table_write(f, "commbench/results", sizeof(cb_row), fields,
                   (int)(sizeof fields / sizeof fields[0]), b->rows, b->n_rows);
}

static void cb_placement_write(hid_t f, const cb_bench *b) {
    const cb_field ranks[] = {
        NUM(cb_rank_place, rank, H5T_NATIVE_INT32),
        STR(cb_rank_place, host),
        NUM(cb_rank_place, node_index, H5T_NATIVE_INT32),
        NUM(cb_rank_place, local_rank, H5T_NATIVE_INT32),
    };
    cb_table_write(f, "commbench/ranks", sizeof(cb_rank_place), ranks,
                   (int)(sizeof ranks / sizeof ranks[0]), b->places, b->world_size);
    const cb_field axes[] = {
        STR(cb_axis_nodes, axis),
        NUM(cb_axis_nodes, ranks, H5T_NATIVE_INT32),
        NUM(cb_axis_nodes, groups, H5T_NATIVE_INT32),
        NUM(cb_axis_nodes, groups_crossing, H5T_NATIVE_INT32),
        STR(cb_axis_nodes, tier),
    };
    cb_table_write(f, "commbench/axes", sizeof(cb_axis_nodes), axes,
                   (int)(sizeof axes / sizeof axes[0]), b->nodes, CB_AXIS_COUNT);
}

/* One row per measured tier (an absent tier has no row; attribute absent_<tier> says why),
 * and every (tier, size) point. */
static void cb_tiers_write(hid_t f, const cb_bench *b) {
    cb_tier_fit fits[CB_TIER_COUNT];
    long n = 0;
    for (int t = 0; t < CB_TIER_COUNT; t++)
        if (b->tier_present[t]) fits[n++] = b->tiers[t];
    const cb_field tier_fields[] = {
        STR(cb_tier_fit, tier),
        NUM(cb_tier_fit, rank_a, H5T_NATIVE_INT32),
        NUM(cb_tier_fit, rank_b, H5T_NATIVE_INT32),
        STR(cb_tier_fit, host_a),
        STR(cb_tier_fit, host_b),
        NUM(cb_tier_fit, alpha_s, H5T_NATIVE_DOUBLE),
        NUM(cb_tier_fit, beta_bytes_s, H5T_NATIVE_DOUBLE),
        NUM(cb_tier_fit, alpha_small_s, H5T_NATIVE_DOUBLE),
        NUM(cb_tier_fit, n_sizes, H5T_NATIVE_INT32),
        NUM(cb_tier_fit, wrong, H5T_NATIVE_INT64),
    };
    cb_table_write(f, "commbench/tiers", sizeof(cb_tier_fit), tier_fields,
                   (int)(sizeof tier_fields / sizeof tier_fields[0]), fits, n);
    const cb_field sample_fields[] = {
        STR(cb_tier_sample, tier),
        NUM(cb_tier_sample, size_bytes, H5T_NATIVE_INT64),
        NUM(cb_tier_sample, time_s, H5T_NATIVE_DOUBLE),
        NUM(cb_tier_sample, wrong, H5T_NATIVE_INT64),
    };
    cb_table_write(f, "commbench/tier_samples", sizeof(cb_tier_sample), sample_fields,
                   (int)(sizeof sample_fields / sizeof sample_fields[0]), b->samples, b->n_samples);
    hid_t d = H5Dopen2(f, "commbench/tiers", H5P_DEFAULT);
    H5_CHECK(d);
    for (int t = 0; t < CB_TIER_COUNT; t++)
        if (!b->tier_present[t]) {
            char name[32];
            snprintf(name, sizeof name, "absent_%s", CB_TIER_NAMES[t]);
            h5_attr_write_string(d, name, b->tier_absent[t]);
        }
    H5Dclose(d);
}

int cb_write(const char *path, const cb_bench *b, const cb_args *a) {
    hid_t f;
    H5E_BEGIN_TRY { f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }
    H5E_END_TRY;
    if (f < 0) {
        error_set("%s: cannot create the commbench file", path);
        return -1;
    }
    const mesh *m = &b->m;
    h5_attr_write_string(f, "format", "tripar-commbench");
    h5_attr_write_int(f, "format_version", 2);
    h5_attr_write_string(f, "tripar_version", TRIPAR_VERSION);
    h5_attr_write_string(f, "mode", a->tiers ? "tiers" : "collectives");
    h5_attr_write_int(f, "world_size", m->world_size);
    h5_attr_write_int(f, "node_count", m->node_count);
    h5_attr_write_int(f, "dp", MESH_DP(m));
    h5_attr_write_int(f, "tp", MESH_TP(m));
    h5_attr_write_int(f, "pp", MESH_PP(m));
    h5_attr_write_string(f, "order", m->order_text);
    h5_attr_write_int(f, "iters", a->iters);
    h5_attr_write_int(f, "warmup", a->warmup);
    h5_attr_write_string(f, "comm", b->comm == CB_COMM_NCCL ? "nccl" : "mpi");
    h5_attr_write_string(f, "memory", b->have_backend ? "device" : "host");
    h5_attr_write_int(f, "wrong_total", b->wrong_total);
    cb_placement_write(f, b);
    if (a->tiers)
        cb_tiers_write(f, b);
    else
        cb_results_write(f, b);
    H5_CHECK(H5Fclose(f));
    return 0;
}
