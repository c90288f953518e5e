/* Parallel checkpoint save and load under mpirun: save the synthetic model from a dp x tp x pp
 * mesh, check on rank 0 that the file holds exactly the single-rank synthetic model, then load
 * it back on the mesh and compare every rank's weight memory byte for byte with the synthetic
 * fill (fp32 and int8, whose row scales are agreed over TP). Also a mismatched model is
 * refused on every rank. Usage: test_checkpoint_mpi DP TP PP FILE.h5 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "base/check.h"
#include "io/checkpoint.h"
#include "io/h5util.h"
#include "parallel/mesh.h"
#include "model/model.h"

static int failures;

#include "../expect.h"

static void model_build(model *m, const model_config *cfg, const mesh *mesh, dtype wtype,
                        const backend *be) {
    shard_geom g;
    shard_geom_init(&g, cfg, MESH_TP(mesh), mesh->coord[AXIS_TP], MESH_PP(mesh),
                    mesh->coord[AXIS_PP]);
    memset(m, 0, sizeof *m);
    model_tensor_table(m, cfg, &g, wtype);
    model_alloc(m, be);
}

/* Rank 0, serial: every element of every dataset equals the single-rank synthetic value. */
static void file_check_serial(const char *path, const model_config *cfg, uint64_t seed) {
    model full;
    shard_geom g;
    shard_geom_init(&g, cfg, 1, 0, 1, 0);
    memset(&full, 0, sizeof full);
    model_tensor_table(&full, cfg, &g, DTYPE_F32);
    hid_t file = h5_open_read(path);
    EXPECT(file >= 0, "cannot open %s", path);
    if (file < 0) return;
    for (int i = 0; i < full.n_tensors; i++) {
        const tensor_desc *t = &full.tensors[i];
        char link[64];
        snprintf(link, sizeof link, "/weights/%s", t->name);
        long n = tensor_global_elems(t);
        float *vals = xmalloc((unsigned long)n * sizeof(float));
        hid_t dset = H5Dopen2(file, link, H5P_DEFAULT);
        H5_CHECK(H5Dread(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals));
        H5Dclose(dset);
        long wrong = 0;
        for (long k = 0; k < n; k++) {
            float want = synthetic_value(seed, t->name, k, t->init, t->init_std);
            wrong += memcmp(&want, &vals[k], sizeof want) != 0;
        }
        EXPECT(wrong == 0, "%s: %ld of %ld elements differ from the synthetic model", t->name,
               wrong, n);
        free(vals);
    }
    H5Fclose(file);
}

/* Loads the file into a fresh model and compares with the synthetic fill, byte for byte. */
static void load_compare(const char *path, const model_config *cfg, mesh *mesh, dtype wtype,
                         const backend *be, uint64_t seed) {
    model a, b;
    model_build(&a, cfg, mesh, wtype, be);
    model_build(&b, cfg, mesh, wtype, be);
    model_fill_synthetic(&a, be, seed, &mesh->axis[AXIS_TP]);
    int rc = checkpoint_load(&b, be, path, mesh->world, &mesh->axis[AXIS_TP], 1);
    EXPECT(rc == STATUS_OK, "checkpoint_load: %s", error_message());
    EXPECT(a.weight_bytes == b.weight_bytes, "weight sizes differ");
    for (int i = 0; i < a.n_tensors; i++) {
        const tensor_desc *t = &a.tensors[i];
        if (!t->present) continue;
        size_t esize = t->is_matrix ? dtype_size(wtype) : sizeof(float);
        size_t bytes = (size_t)tensor_local_elems(t) * esize;
        EXPECT(memcmp(*t->slot, *b.tensors[i].slot, bytes) == 0,
               "%s (%s): loaded weights differ from the synthetic fill", t->name,
               dtype_name(wtype));
    }
    EXPECT(memcmp(a.weight_memory, b.weight_memory, a.weight_bytes) == 0,
           "weight memory differs (%s)", dtype_name(wtype));
    model_free(&a, be);
    model_free(&b, be);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    CHECK(argc == 5, "usage: test_checkpoint_mpi DP TP PP FILE.h5");
    const int dp = atoi(argv[1]), tp = atoi(argv[2]), pp = atoi(argv[3]);
    const char *path = argv[4];
    int world_size, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(mesh_validate(world_size, dp, tp, pp, "tp-pp-dp") == 0, "%s", error_message());
    mesh mesh;
    mesh_init(&mesh, MPI_COMM_WORLD, dp, tp, pp, "tp-pp-dp");
    mesh_attach_mpi(&mesh);
    backend be;
    backend_options opt = {.threads = 1};
    CHECK(backend_cpu_init(&be, &opt) == 0, "cpu backend");

    /* 5 layers over pp stages and 4 heads over tp ranks: uneven splits where they can be */
    model_config cfg = {.layers = 5, .heads = 4, .embd = 16, .vocab = 37, .ctx = 12,
                        .mlp = 40, .ln_eps = 1e-5f, .norm = NORM_PRE};
    const uint64_t seed = 1234;
    model m;
    model_build(&m, &cfg, &mesh, DTYPE_F32, &be);
    EXPECT(checkpoint_save(&m, seed, path, &mesh) == STATUS_OK, "save: %s", error_message());
    model_free(&m, &be);
    MPI_Barrier(MPI_COMM_WORLD);

    model_config back;
    EXPECT(checkpoint_read_config(path, &back) == STATUS_OK, "read_config: %s", error_message());
    EXPECT(memcmp(&back, &cfg, sizeof cfg) == 0, "config attributes do not round-trip");
    if (rank == 0) file_check_serial(path, &cfg, seed);
    MPI_Barrier(MPI_COMM_WORLD);

    load_compare(path, &cfg, &mesh, DTYPE_F32, &be, seed);
    load_compare(path, &cfg, &mesh, DTYPE_INT8, &be, seed);

    /* a model whose shapes differ from the file is refused on every rank, before reading */
    model_config other = cfg;
    other.mlp = 48;
    model_build(&m, &other, &mesh, DTYPE_F32, &be);
    int rc = checkpoint_load(&m, &be, path, mesh.world, &mesh.axis[AXIS_TP], 1);
    EXPECT(rc == STATUS_BAD_INPUT, "a mismatched model was loaded (rc %d)", rc);
    EXPECT(rank != 0 || strstr(error_message(), "fc1_w"), "message '%s' lacks fc1_w",
           error_message());
    model_free(&m, &be);

    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_checkpoint_mpi dp=%d tp=%d pp=%d: %s\n", dp, tp, pp,
               total ? "FAILED" : "ok");
    backend_free(&be);
    mesh_free(&mesh);
    MPI_Finalize();
    return total ? 1 : 0;
}
