/* Writes a resolved job back as YAML: every key, defaults included, so a run file records
 * exactly what ran and the text reloads (job_load) to the same job. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "job/job.h"
#include "job/job_tree.h"

/* A YAML double-quoted string: safe for any text a loaded job can hold (valid UTF-8, which
 * job_load makes sure of). Code points that YAML refuses raw (C1 controls, U+FFFE, U+FFFF) or
 * would fold as line breaks inside the quotes (NEL, LS, PS), and the BOM, are escaped. */
static void job_dump_quoted(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned cp = 0;
        int len = *p >= 0x80 ? jtree_utf8_decode(p, &cp) : 0;
        if (len > 0) {
            if ((cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF ||
                cp == 0xFFFE || cp == 0xFFFF)
                fprintf(out, "\\u%04X", cp);
            else
                fwrite(p, 1, (size_t)len, out);
            p += len - 1;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\r': fputs("\\r", out); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(out, "\\x%02x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

/* The shortest decimal that reads back as the same float: 1e-05, not 9.99999975e-06. */
static const char *job_dump_float(float x, char *buf, size_t size) {
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)x);
        if (strtof(buf, NULL) == x) return buf;
    }
    snprintf(buf, size, "%.9g", (double)x);
    return buf;
}

static void job_dump_model(const job *j, FILE *out) {
    fputs("model:\n", out);
    char num[32];
    if (j->synthetic) {
        fprintf(out, "  arch: %s\n  synthetic:\n", arch_kind_name(j->arch));
        if (j->preset[0]) fprintf(out, "    preset: %s\n", j->preset);
        fprintf(out,
                "    layers: %d\n    heads: %d\n    embd: %d\n    vocab: %d\n"
                "    ctx: %d\n    mlp: %d\n    seed: %" PRIu64 "\n",
                j->layers, j->heads, j->embd, j->vocab, j->ctx, j->mlp, j->seed);
        if (arch_is_llama(j->arch)) {
            fprintf(out, "    kv_heads: %d\n    rope_theta: %s\n    tie_embeddings: %s\n",
                    j->kv_heads, job_dump_float(j->rope_theta, num, sizeof num),
                    j->tie_embeddings ? "true" : "false");
            if (j->head_dim > 0) fprintf(out, "    head_dim: %d\n", j->head_dim);
            if (j->rope_scaling) {
                fprintf(out, "    rope_scaling:\n      factor: %s\n",
                        job_dump_float(j->rope_factor, num, sizeof num));
                fprintf(out, "      low_freq_factor: %s\n",
                        job_dump_float(j->rope_low_freq_factor, num, sizeof num));
                fprintf(out, "      high_freq_factor: %s\n",
                        job_dump_float(j->rope_high_freq_factor, num, sizeof num));
                fprintf(out, "      original_max_position_embeddings: %d\n", j->rope_original_ctx);
            } else if (j->preset[0]) {
                fputs("    rope_scaling: null\n", out);
            }
        }
        if (arch_is_moe(j->arch))
            fprintf(out,
                    "    experts: %d\n    experts_top_k: %d\n    shared_expert_mlp: %d\n"
                    "    norm_topk_prob: %s\n",
                    j->experts, j->experts_top_k, j->shared_expert_mlp,
                    j->norm_topk_prob ? "true" : "false");
    } else {
        if (j->arch_given) fprintf(out, "  arch: %s\n", arch_kind_name(j->arch));
        fputs("  checkpoint: ", out);
        job_dump_quoted(out, j->checkpoint);
        fputc('\n', out);
        if (j->layers > 0) { /* filled from the checkpoint by the runner: a note, not a key */
            fprintf(out,
                    "  # from the checkpoint: layers %d, heads %d, embd %d, vocab %d, "
                    "ctx %d, mlp %d, kv_heads %d, arch %s",
                    j->layers, j->heads, j->embd, j->vocab, j->ctx, j->mlp,
                    j->kv_heads > 0 ? j->kv_heads : j->heads, arch_kind_name(j->arch));
            /* a mixture of experts' routing, on the same line: report --roofline and plan
             * --validate price the experts from it */
            if (arch_is_moe(j->arch))
                fprintf(out, ", experts %d, experts_top_k %d, shared_expert_mlp %d",
                        j->experts, j->experts_top_k, j->shared_expert_mlp);
            fputc('\n', out);
        }
    }
    if (j->tokenizer[0]) {
        fputs("  tokenizer: ", out);
        job_dump_quoted(out, j->tokenizer);
        fputc('\n', out);
    }
    char eps[32];
    fprintf(out, "  norm: %s\n  precision: %s\n  int8_group: %d\n  quantize_head: %s\n",
            norm_kind_name(j->norm), precision_kind_name(j->precision), j->int8_group,
            j->quantize_head < 0 ? "auto"
            : j->quantize_head   ? "true"
                                 : "false");
    /* kv_dtype as resolved: the run file records the cache's type, not "auto" */
    fprintf(out,
            "  kv_cache: %s\n  kv_block: %d\n  kv_dtype: %s\n  ln_eps: %s\n  verify_checksums: %s\n",
            kv_cache_kind_name(j->kv_cache), j->kv_block, kv_dtype_kind_name(j->kv_dtype),
            job_dump_float(j->ln_eps, eps, sizeof eps), j->verify_checksums ? "true" : "false");
}

static void job_dump_input(const job *j, FILE *out) {
    fputs("input:\n", out);
    if (j->synthetic_input) {
        fprintf(out, "  synthetic:\n    batch: %d\n    length: %d\n    seed: %" PRIu64 "\n",
                j->batch, j->prompt_len, j->input_seed);
    } else if (j->text) {
        /* a text_file is inlined: the run file then holds the very text that ran */
        fputs("  text: ", out);
        job_dump_quoted(out, j->text);
        fputc('\n', out);
        if (j->chat) fputs("  chat: true\n", out);
    } else if (j->tokens && j->batch > 0) {
        /* a tokens_file is inlined for the same reason */
        fputs("  tokens:\n", out);
        for (int b = 0; b < j->batch; b++) {
            fputs("    - [", out);
            for (int t = 0; t < j->prompt_len; t++)
                fprintf(out, "%s%" PRId32, t ? ", " : "", j->tokens[(size_t)b * j->prompt_len + t]);
            fputs("]\n", out);
        }
    } else {
        fputs("  # no input resolved\n", out);
    }
}

void job_dump(const job *j, FILE *out) {
    char temp[32];
    fputs("# tripar job, resolved: every key with its value or default\n", out);
    job_dump_model(j, out);
    fprintf(out,
            "backend:\n  kind: %s\n  threads: %d\n  cpu_isa: %s\n  device: %d\n  comm: %s\n"
            "  cuda_graphs: %s\n  tf32: %s\n  memory_check: %s\n",
            backend_kind_name(j->backend), j->threads, job_cpu_isa_names()[j->cpu_isa], j->device,
            comm_kind_name(j->comm), j->cuda_graphs ? "true" : "false",
            j->allow_tf32 ? "true" : "false", j->memory_check ? "true" : "false");
    fprintf(out,
            "parallel:\n  dp: %d\n  tp: %d\n  pp: %d\n  ep: %d\n  microbatches: %d\n  order: %s\n"
            "  overlap: %s\n  chunks: %d\n  mpi_tuning: %s\n",
            j->dp, j->tp, j->pp, j->ep, j->microbatches, j->order, j->overlap ? "true" : "false",
            j->chunks, j->mpi_tuning ? "auto" : "off");
    job_dump_input(j, out);
    fprintf(out,
            "generate:\n  new_tokens: %d\n  sampling: %s\n  temperature: %s\n  top_k: %d\n"
            "  seed: %" PRIu64 "\n  stop_at_eos: %s\n",
            j->new_tokens, sampling_kind_name(j->sampling),
            job_dump_float(j->temperature, temp, sizeof temp), j->top_k, j->sample_seed,
            j->stop_at_eos < 0 ? "auto"
            : j->stop_at_eos   ? "true"
                               : "false");
    if (j->eos_id_given >= 0) fprintf(out, "  eos_id: %d\n", j->eos_id_given);
    char rate[32], duration[32];
    fprintf(out,
            "bench:\n  warmup: %d\n  iterations: %d\n  roofline: %s\n  arrival_rate: %s\n"
            "  duration: %s\n  arrival_seed: %" PRIu64 "\n",
            j->warmup, j->iterations, j->roofline ? "true" : "false",
            job_dump_float(j->arrival_rate, rate, sizeof rate),
            job_dump_float(j->duration, duration, sizeof duration), j->arrival_seed);
    fputs("record:\n  out: ", out);
    job_dump_quoted(out, j->out);
    fputs("\n  activations: [", out);
    for (int i = 0; i < j->n_activations; i++)
        fprintf(out, "%s%s", i ? ", " : "", j->activations[i]);
    /* quoted: YAML 1.1 readers take a bare off for false */
    fprintf(out,
            "]\n  timings: \"%s\"\n  flush_every: %d\n  flush_seconds: %d\n"
            "  stop_grace_seconds: %d\n  telemetry: %d\n  stall_seconds: %d\n  sched: %s\n",
            timings_level_name(j->timings), j->flush_every, j->flush_seconds, j->stop_grace_seconds,
            j->telemetry_hz, j->stall_seconds, j->sched ? "true" : "false");
    if (j->perplexity_window > 0) /* only when on: the section's presence turns it on */
        fprintf(out, "perplexity:\n  window: %d\n  chunks: %d\n", j->perplexity_window,
                j->perplexity_chunks);
}

char *job_dump_string(const job *j) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f, "open_memstream failed");
    job_dump(j, f);
    CHECK(fclose(f) == 0, "writing the job dump failed");
    return text;
}
