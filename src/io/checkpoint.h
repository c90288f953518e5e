/* HDF5 checkpoints (format "tripar-checkpoint", docs/checkpoint.md): validation before any
 * compute, a parallel load where each rank reads its shard as a union-of-blocks hyperslab,
 * a parallel save of the synthetic model, and the Hugging Face GPT-2 importer. */
#pragma once
#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "io/tokenizer.h"
#include "parallel/comm.h"
#include "parallel/mesh.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CHECKPOINT_FORMAT "tripar-checkpoint"
/* Version 1: every tensor float32. Version 2 adds the stored precision (bf16, int8w); an fp32
 * file is still written as version 1, so every tripar reads it. This tripar reads both. */
#define CHECKPOINT_FORMAT_VERSION 2
#define CHECKPOINT_FORMAT_VERSION_FP32 1
#define CHECKPOINT_N_TENSORS 16

/* The weight datasets in file order (also the order in which every rank loads them). */
extern const char *const checkpoint_tensor_names[CHECKPOINT_N_TENSORS];

/* Llama's weight datasets (docs/checkpoint.md); head_w only when the head is untied. */
#define CHECKPOINT_LLAMA_N_TENSORS 9
extern const char *const checkpoint_llama_tensor_names[CHECKPOINT_LLAMA_N_TENSORS];
/* The datasets of cfg's architecture, in file order; returns their count. */
int checkpoint_tensor_list(const model_config *cfg, const char *const **names);

/* Global shape of /weights/<name> for cfg; returns the number of dims (1..3), or 0 when the
 * name is not a checkpoint tensor. */
int checkpoint_tensor_shape(const model_config *cfg, const char *name, long shape[3]);

/* How a checkpoint stores its weights (docs/checkpoint.md, "Stored precision"): each tensor
 * in the dtype a load in `precision` holds it in (matrices bf16, or int8 with float32 scales
 * in /weights/<name>_scale; vectors and the embedding float32). Root attributes precision,
 * int8_group and quantize_head; files without them (format_version 1) are fp32. */
typedef struct {
    precision_kind precision; /* fp32, bf16, int8w, or a block format (q8_0, q4_0, q4_1, q4_k) */
    int int8_group;           /* int8w: the model.int8_group its scales were made for */
    int quantize_head;        /* an untied head_w stored in precision (1) or float32 (0) */
} checkpoint_storage;

#define CHECKPOINT_SCALE_SUFFIX "_scale"
/* q4_1's and q4_k's block mins, float32 beside the scales (docs/checkpoint.md, "Stored
 * precision"). */
#define CHECKPOINT_MIN_SUFFIX "_min"

/* The precisions a checkpoint is stored in ("fp32, bf16, int8w"), and one by name (0, or -1
 * when the name is none of them). */
const char *checkpoint_precision_names(void);
int checkpoint_precision_parse(const char *name, precision_kind *p);

/* The storage of cfg's model imported in precision p with int8_group (ignored unless int8w),
 * the LM head as model.quantize_head: auto decides (an untied head in p). */
checkpoint_storage checkpoint_storage_for(const model_config *cfg, precision_kind p,
                                          int int8_group);

/* The dtype /weights/<name> is stored in under st (DTYPE_F32, DTYPE_BF16 or DTYPE_INT8) and,
 * for int8, its weight columns per scale in *group (0: one per row; group may be NULL). The
 * engine's own size table decides, so a load in st's precision takes the values as stored.
 * A block format's matrices are stored as int8 quants with a scale per 32 columns (group 32):
 * qblocks_unpack's planes, packed back into blocks at load. */
dtype checkpoint_tensor_dtype(const model_config *cfg, const checkpoint_storage *st,
                              const char *name, int *group);

/* The global shape of /weights/<name>_scale for an int8 tensor of `group` columns per scale:
 * the weight's shape less its columns (group 0), or with ceil(columns / group) of them. */
int checkpoint_scale_shape(const model_config *cfg, const char *name, int group, long shape[3]);
void checkpoint_scale_name(const char *name, char *out, size_t len);
void checkpoint_min_name(const char *name, char *out, size_t len);

/* The HDF5 file type of a stored dtype (caller closes): float32, int8, or bf16 as a 16-bit
 * HDF5 float with 8 exponent bits; and whether a dataset's type is that one. */
hid_t checkpoint_h5_type(dtype t);
int checkpoint_h5_type_is(hid_t type, dtype t);

/* Reads the storage attributes of an open checkpoint of the given format_version into st
 * (fp32 for version 1). STATUS_OK or STATUS_BAD_INPUT with error_message() naming the file. */
int checkpoint_read_storage_attrs(hid_t file, const char *path, long long version,
                                  checkpoint_storage *st);
/* Writes them, and format_version 2, unless st is fp32 (then the file stays version 1). */
void checkpoint_write_storage_attrs(hid_t file, const checkpoint_storage *st);

/* Whether a job in precision p whose model config is cfg (model_config_from_job: int8_group,
 * quantize_head) may load a checkpoint stored as st: NULL when it may, else the job key at
 * fault ("model.precision", "model.int8_group", "model.quantize_head") with error_message()
 * saying what is stored and what is allowed. Allowed: an fp32 file with any precision; bf16
 * with bf16 or fp32 (widened exactly); int8w with int8w of the same int8_group. */
const char *checkpoint_storage_refusal(const checkpoint_storage *st, precision_kind p,
                                       const model_config *cfg, const char *path);

/* Opens path with the serial driver and checks everything a load needs: the format and
 * version attributes, the config attributes, every /weights dataset present as float32 with
 * exactly the expected shape, and every dataset's storage inside the file (a truncated
 * checkpoint is reported here, not as garbage weights later). Fills cfg. Returns STATUS_OK or
 * STATUS_BAD_INPUT with error_message() naming the file and the tensor. Pure function of the
 * file, so every rank may call it and gets the same answer without communication. */
int checkpoint_read_config(const char *path, model_config *cfg);
/* The same, with how the weights are stored: every dataset is checked in its stored dtype (and
 * an int8 one's scales too). */
int checkpoint_read_stored(const char *path, model_config *cfg, checkpoint_storage *st);

/* Reads this rank's shard of every present table row of m (model_tensor_table done,
 * model_alloc done) and stores it with model_store_tensor. Collective over world: the file is
 * opened with the MPI-IO driver and every read is collective; ranks that hold none of a tensor
 * take part with an empty selection. tp is the TP group passed on to model_store_tensor.
 * With verify_checksums, HDF5 checks the Fletcher32 checksum of every chunk a rank reads, and
 * rank 0 warns once when tensors carry none. Returns STATUS_OK, or STATUS_BAD_INPUT (same on
 * every rank) when a dataset's shape does not match the table or a read fails: error_message()
 * names the file and the first tensor that failed on any rank, and a failed checksum as such. */
int checkpoint_load(model *m, const backend *be, const char *path, MPI_Comm world, comm *tp,
                    int verify_checksums);

/* Writes the synthetic model (seed) held across the mesh as a checkpoint. Collective over
 * mesh->world. Each element is written once: by dp_rank 0, by tp_rank 0 for tensors that are
 * replicated over TP, and wte by pp_rank 0. Values are regenerated with synthetic_value, so
 * the file reloads to bit-identical fp32 weights. Returns STATUS_OK or STATUS_RUNTIME. */
int checkpoint_save(const model *m, uint64_t seed, const char *path, const mesh *mesh);

/* Writing helpers shared by checkpoint_save and the importers: the root attributes of cfg, and
 * one float32 dataset /weights/<name> of the global shape (caller closes it). */
void checkpoint_write_config_attrs(hid_t file, const model_config *cfg);
hid_t checkpoint_dataset_create(hid_t weights_group, const model_config *cfg, const char *name);
/* The one place a checkpoint's datasets get their storage properties: name under group, of
 * the global shape and HDF5 file type given (checkpoint_h5_type), chunked and checksummed by
 * checkpoint_dcpl_create for that type's element size. Caller closes it. */
hid_t checkpoint_dataset_create_typed(hid_t group, const char *name, int ndims, const long *shape,
                                      hid_t type);

/* About this many bytes per chunk of a weight dataset. */
#define CHECKPOINT_CHUNK_BYTES (1u << 20)
/* The creation properties of every weight dataset a writer makes (the caller closes them):
 * chunks of about CHECKPOINT_CHUNK_BYTES, one layer each, tiled over the rows and columns of a
 * matrix, each with HDF5's Fletcher32 checksum (docs/checkpoint.md, "Integrity"). elem_bytes
 * is the stored element's size. */
hid_t checkpoint_dcpl_create(int ndims, const hsize_t *dims, size_t elem_bytes);

/* 1 when the dataset carries Fletcher32 checksums, 0 when it was written without (a checkpoint
 * from before they were added, or rewritten by a tool that dropped the filter). */
int checkpoint_dataset_checksummed(hid_t dset);

/* Why a read failed on this rank. */
typedef enum {
    CHECKPOINT_READ_OK = 0,
    CHECKPOINT_READ_FAILED = 1,   /* another HDF5 read error */
    CHECKPOINT_READ_CHECKSUM = 2, /* a chunk's data does not match its Fletcher32 checksum */
} checkpoint_read_kind;
typedef struct {
    int kind;       /* checkpoint_read_kind */
    char desc[120]; /* HDF5's words for the innermost error */
} checkpoint_read_error;
/* Fills e from the current HDF5 error stack (call it right after the failed read, before any
 * other HDF5 call clears the stack) and clears the stack. */
void checkpoint_read_error_take(checkpoint_read_error *e);

/* Writes the tokenizer texts under /tokenizer of an open file: tokenizer.json as /tokenizer/json
 * when given, else vocab.json and merges.txt as /tokenizer/vocab and /tokenizer/merges. */
void checkpoint_write_tokenizer(hid_t file, const char *vocab_json, const char *merges_txt,
                                const char *tokenizer_json);

/* Reads /tokenizer/json, or else /tokenizer/vocab and /tokenizer/merges (malloc'ed; the others
 * NULL). Returns 0, 1 when the checkpoint has no tokenizer, or -1 with error_message() set when
 * the file cannot be read. */
int checkpoint_read_tokenizer(const char *path, char **vocab_json, char **merges_txt,
                              char **tokenizer_json);

/* Builds the checkpoint's tokenizer from /tokenizer/json or /tokenizer/{vocab,merges}. Returns
 * 0, 1 when the checkpoint has no tokenizer (*t = NULL), or STATUS_BAD_INPUT (2) with
 * error_message() set. */
int checkpoint_load_tokenizer(tokenizer **t, const char *path);

/* What the attributes of /tokenizer say of the model's special tokens (import-gguf writes them;
 * docs/checkpoint.md). Each is -1 (chat_template NULL) where the checkpoint does not say. */
typedef struct {
    long long bos_id, eos_id;
    int add_bos;          /* 0 or 1 */
    char *chat_template;  /* malloc'ed */
} tokenizer_meta;

/* Reads them. Returns 0, or -1 with error_message() set when the file cannot be read or an
 * attribute has the wrong kind. */
int checkpoint_read_tokenizer_meta(const char *path, tokenizer_meta *m);
void tokenizer_meta_free(tokenizer_meta *m);

#ifdef __cplusplus
}
#endif
