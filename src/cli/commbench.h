/* `tripar commbench`'s own types, shared by its files: the arguments (commbench.c), the
 * collective sweep (commbench_ops.c), the point-to-point tiers (commbench_tiers.c) and the
 * HDF5 file (commbench_write.c). Not an interface of any other command. */
#pragma once
#include <stdint.h>

#include "job/job.h"
#include "kernels/backend.h"
#include "parallel/mesh.h"

/* The collectives, in the order they run: indexes of CB_COLLS and of cb_args.ops. */
enum { OP_ALLREDUCE = 0, OP_ALLGATHER, OP_SENDRECV, OP_BCAST, OP_ALLTOALL, OP_COUNT };
enum { CB_AXIS_TP = 0, CB_AXIS_PP, CB_AXIS_DP, CB_AXIS_WORLD, CB_AXIS_COUNT };
extern const char *const CB_AXIS_NAMES[CB_AXIS_COUNT];

/* One collective of the sweep, as nccl-tests' struct testColl: how to size, fill, run, check
 * and price it, so a new collective is one entry of CB_COLLS (commbench_ops.c) and its OP_
 * index. Buffers are float; rank and ranks are the caller's place in its group and the group
 * size. */
typedef struct {
    const char *name; /* --ops and the op column */
    /* for an output buffer of total elements (size(B) / 4): the count each rank passes, and
     * used, the elements of the output buffer that are uploaded and checked */
    void (*counts)(long total, int ranks, long *count, long *used);
    /* the host buffers before a run; send may stay untouched by an in-place op */
    void (*fill)(float *send, float *recv, long count, int rank, int ranks);
    /* peers: 2 x ranks host entries, allocated before timing, for the per-peer counts and
     * displacements of an op that takes them (the all-to-all) */
    void (*run)(comm *c, float *send, float *recv, long count, size_t *peers);
    /* elements of recv that differ from the exact result of one run */
    long (*check)(const float *recv, long count, int rank, int ranks);
    /* nccl-tests' bus bandwidth factor: busbw = algbw * bus_factor(ranks) */
    double (*bus_factor)(int ranks);
    /* why one rank of a stream-ordered comm cannot run it (skipped there), or NULL */
    const char *solo_stream_skip;
    /* where its result lands, as comm_ops (and so the engine) runs it: nccl-tests times every
     * collective both in place and out of place, but comm_ops has one form of each */
    const char *place;
} cb_coll;
extern const cb_coll CB_COLLS[OP_COUNT];

/* The two link tiers of a cost model: ranks that share a node, and ranks that do not. */
enum { CB_TIER_INTRA = 0, CB_TIER_INTER, CB_TIER_COUNT };
extern const char *const CB_TIER_NAMES[CB_TIER_COUNT];

enum { CB_SIZES_MAX = 40 }; /* 8 B doubling to 4 GiB is 30 sizes */
typedef enum { CB_COMM_MPI = 0, CB_COMM_NCCL } cb_comm;

typedef struct {
    long min_bytes, max_bytes;
    int sizes_given;          /* --sizes was on the command line */
    int model_sizes;          /* --sizes model: the job's own message sizes (cb_model_sizes) */
    long sizes[CB_SIZES_MAX]; /* the sizes timed, ascending */
    int n_sizes;
    char sizes_note[200]; /* where model sizes come from, printed in the header */
    int iters, warmup;
    int ops[OP_COUNT], axes[CB_AXIS_COUNT];
    int ops_given, axes_given; /* --ops / --axes were given (they do not apply to --tiers) */
    int tiers;                 /* --tiers: point-to-point alpha/beta per link tier */
    int dp, tp, pp;
    char order[16];
    cb_comm comm;   /* --comm, else the job's backend.comm (nccl), else mpi */
    int comm_given; /* --comm was on the command line */
    int device;     /* the job's backend.device (-1: local rank modulo devices) */
    const char *job_path, *out;
    /* what the job file names (model.checkpoint, input.tokens_file, input.text_file; "" when
     * unused): inputs --out may not replace */
    char job_inputs[3][JOB_PATH_MAX];
    int plant_error;
} cb_args;

/* One row of the table and of /commbench/results (packed in the file). tier says where the
 * axis's groups run: "intra" (every group inside one node), "inter" (every group crosses
 * nodes) or "mixed". */
typedef struct {
    char op[16];
    char axis[8];
    int32_t ranks;
    int64_t size_bytes, count;
    char type[8];
    double time_us, algbw_gbs, busbw_gbs;
    int64_t wrong;
    int32_t groups, groups_crossing;
    char tier[8];
} cb_row;

/* How one axis's groups sit on the nodes (/commbench/axes). */
typedef struct {
    char axis[8];
    int32_t ranks;           /* per group */
    int32_t groups;          /* groups of the axis in the world */
    int32_t groups_crossing; /* of them, those whose ranks are on more than one node */
    char tier[8];            /* "intra", "inter", "mixed" */
} cb_axis_nodes;

/* One rank of the world and where it runs (/commbench/ranks). */
typedef struct {
    int32_t rank, node_index, local_rank;
    char host[64];
} cb_rank_place;

/* One link tier's fit (/commbench/tiers): t(n) = alpha + n / beta for one-way point-to-point
 * of n bytes between rank_a and rank_b. */
typedef struct {
    char tier[8];
    int32_t rank_a, rank_b;
    char host_a[64], host_b[64];
    double alpha_s;       /* intercept of the fit (s) */
    double beta_bytes_s;  /* 1 / slope of the fit (bytes/s) */
    double alpha_small_s; /* half round trip at the smallest size (s) */
    int32_t n_sizes;
    int64_t wrong;
} cb_tier_fit;

/* One measured point of a tier (/commbench/tier_samples). */
typedef struct {
    char tier[8];
    int64_t size_bytes;
    double time_s; /* one way: half the mean round trip */
    int64_t wrong;
} cb_tier_sample;

/* What a run holds: the mesh, each axis's communicator on the buffers commbench uses, those
 * buffers in the comm's memory (device memory over NCCL) and their host twins where data is
 * filled and checked, and the tables, so nothing is allocated while timing. */
typedef struct {
    int rank, world_size;
    mesh m;
    cb_comm comm;
    int have_backend, have_comms;
    backend be;               /* cuda over NCCL; unset over MPI (host memory) */
    comm nccl_dp, nccl_world; /* NCCL on the axes comm_setup leaves to MPI */
    comm *axes[CB_AXIS_COUNT];
    float *send, *recv;   /* comm memory (max_bytes/4 + 1) */
    float *hsend, *hrecv; /* host twins; the same pointers over MPI */
    size_t *peers;        /* (2 * world_size): cb_coll.run's per-peer scratch */
    cb_row *rows;         /* (sizes * OP_COUNT * CB_AXIS_COUNT + 1) */
    long n_rows, wrong_total;
    cb_axis_nodes nodes[CB_AXIS_COUNT];
    cb_rank_place *places; /* (world_size), rank 0 only */
    cb_tier_fit tiers[CB_TIER_COUNT];
    int tier_present[CB_TIER_COUNT];
    char tier_absent[CB_TIER_COUNT][160]; /* why a tier was not measured */
    cb_tier_sample *samples;              /* (CB_TIER_COUNT * sizes) */
    long n_samples;
} cb_bench;

/* The element value rank puts at index i: small integers, so float sums are exact. */
float cb_value(int rank, long i);
/* Host twin <-> comm memory (no-ops over MPI, where they are one buffer). */
void cb_upload(const cb_bench *b, long count);
void cb_download(const cb_bench *b, long count);
/* Waits on the host until every operation this rank queued on a stream-ordered comm is done
 * (nothing to do over MPI, whose operations return complete). */
void cb_drain(const cb_bench *b);

/* commbench_ops.c: the node placement of every axis, then the collective sweep. */
void cb_nodes_measure(cb_bench *b);
void cb_nodes_print(const cb_bench *b);
void cb_run_axis(cb_bench *b, const cb_args *a, int ax);
/* The mean busbw (GB/s) of n rows, nccl-tests' closing "Avg bus bandwidth"; 0 when n is 0. */
double cb_rows_busbw_mean(const cb_row *rows, long n);

/* commbench_tiers.c: --tiers; adds the wrong elements over all ranks to b->wrong_total. */
void cb_tiers_run(cb_bench *b, const cb_args *a);

/* commbench_write.c: rank 0 writes --out. 0, or -1 with error_message() set. */
int cb_write(const char *path, const cb_bench *b, const cb_args *a);
