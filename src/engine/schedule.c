/* The generation schedule of one rank: prefill and decode steps over micro-batches, with
 * pipeline receives posted early and sends in flight while the next micro-batch computes, and
 * the agreement between ranks to stop early. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "engine/engine.h"
#include "engine/sample.h"

/* Message tags on the PP comms: activations use the micro-batch index; the diagnosis of
 * non-finite logits has its own, so its messages never match a receive of the schedule that a
 * slower stage has not cancelled yet. */
enum { TAG_TOKENS = 1000, TAG_DIAGNOSE = 2000 };

/* Greedy tokens stay on the backend between steps when this rank both picks and embeds them
 * (pp == 1) and picking needs no MAXLOC across TP on the host (tp == 1): the argmax writes the
 * ids where the next step's embedding reads them, so a decode step copies no tokens to the
 * device. The host still copies the ids back each step: they are the run's output. */
static int tokens_stay_on_device(const engine *e) {
    return e->m->geom.pp == 1 && e->tp->size == 1 && e->cfg.sampling == SAMPLING_GREEDY;
}

static int row_finite(const float *row, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(row[i])) return 0;
    return 1;
}

/* Ends the sampler's local work before its TP collective and returns the collective's start:
 * the collective is timed as sample_wait, so a slow peer never shows as sampling compute. */
static double sample_wait_begin(engine *e, int *ev) {
    timer_end(e->tm, *ev);
    return timer_host_seconds();
}

/* After the collective: its sample_wait event, and the sampler's remaining work reopens as a
 * second sample event. */
static void sample_wait_end(engine *e, int *ev, double t0, int step, int mb) {
    timer_add_host(e->tm, PHASE_SAMPLE_WAIT, step, mb, TIMER_NO_LAYER, t0, timer_host_seconds());
    *ev = timer_begin(e->tm, PHASE_SAMPLE, step, mb, TIMER_NO_LAYER);
}

/* Next token of each sequence of micro-batch mb from the logits on the backend, and whether
 * its logits were finite (e->row_finite); identical on every TP rank. Greedy uses a
 * distributed argmax (local max, then MAXLOC across TP, which breaks ties to the lowest index
 * like a single rank): NaN wins both, so a non-finite maximum is how a row with NaN (or with
 * an infinite maximum) shows, at the cost of copying nb floats back. Sampling assembles the
 * full rows and checks them whole. *ev is the open sample event; with tp > 1 it is ended
 * before the collective and a new one begun after it (sample_wait_begin, sample_wait_end). */
static void select_tokens(engine *e, int mb, int step, int position, int32_t *out, int *ev) {
    const shard_geom *g = &e->m->geom;
    const backend_ops *ops = e->be->ops;
    const int nb = e->split.size[mb], V = e->m->cfg.vocab, VL = g->vocab_local;
    comm *tp = e->tp;
    if (e->cfg.sampling == SAMPLING_GREEDY) {
        comm_maxloc_pair *pairs = e->maxloc_host;
        float *vals = e->logits_shard_host;
        int32_t *idx = tokens_stay_on_device(e) ? e->next_tok + e->split.begin[mb] : e->max_idx;
        ops->argmax(e->be->ctx, e->max_val, idx, e->logits, nb, VL);
        ops->copy_to_host(e->be->ctx, vals, e->max_val, (size_t)nb * sizeof(float));
        ops->copy_to_host(e->be->ctx, e->tok_host, idx, (size_t)nb * sizeof(int32_t));
        for (int b = 0; b < nb; b++) {
            pairs[b].value = vals[b];
            pairs[b].index = e->tok_host[b] + g->vocab_begin;
        }
        if (tp->size > 1) {
            double t0 = sample_wait_begin(e, ev);
            tp->ops->allreduce_maxloc(tp->ctx, pairs, (size_t)nb);
            sample_wait_end(e, ev, t0, step, mb);
        }
        for (int b = 0; b < nb; b++) {
            out[b] = pairs[b].index;
            e->row_finite[b] = isfinite(pairs[b].value) != 0;
        }
        return;
    }
    ops->copy_to_host(e->be->ctx, e->logits_shard_host, e->logits, (size_t)nb * VL * sizeof(float));
    if (tp->size > 1) {
        double t0 = sample_wait_begin(e, ev);
        for (int b = 0; b < nb; b++)
            tp->ops->allgatherv(tp->ctx, e->logits_host + (size_t)b * V,
                                e->logits_shard_host + (size_t)b * VL, e->vocab_counts,
                                e->vocab_displs, COMM_FLOAT);
        sample_wait_end(e, ev, t0, step, mb);
    } else {
        memcpy(e->logits_host, e->logits_shard_host, (size_t)nb * V * sizeof(float));
    }
    for (int b = 0; b < nb; b++) {
        long seq = e->seq_global_begin + e->split.begin[mb] + b;
        double u = sample_uniform(e->cfg.sample_seed, seq, position);
        float *row = e->logits_host + (size_t)b * V;
        e->row_finite[b] = (unsigned char)row_finite(row, V);
        out[b] = e->row_finite[b] ? sample_top_k(row, V, e->cfg.temperature, e->cfg.top_k, u,
                                                 e->sample_scratch)
                                  : sample_argmax(row, V); /* any id: it is never recorded */
    }
}

/* Embedding of micro-batch mb at positions pos0.. into x; vocab-parallel, so TP all-reduces. */
static void embed_microbatch(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    const shard_geom *g = &e->m->geom;
    const int nb = e->split.size[mb], rows = nb * n_new;
    int ev = timer_begin(e->tm, PHASE_EMBED, step, mb, TIMER_NO_LAYER);
    const int32_t *tokens = e->tok_dev;
    if (step > 0 && tokens_stay_on_device(e) && !e->diagnose) {
        tokens = e->next_tok + e->split.begin[mb]; /* the previous step's argmax, n_new == 1 */
    } else {
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < n_new; i++) {
                int s = e->split.begin[mb] + b;
                e->tok_host[b * n_new + i] = e->tokens[(size_t)s * e->total_len + pos0 + i];
            }
        e->be->ops->copy_to_device(e->be->ctx, e->tok_dev, e->tok_host,
                                   (size_t)rows * sizeof(int32_t));
    }
    /* Position embeddings are added by TP rank 0 only, so the all-reduce counts them once. */
    e->be->ops->embed(e->be->ctx, x, tokens, e->m->w.wte, g->tp_rank == 0 ? e->m->w.wpe : NULL,
                      rows, e->m->cfg.embd, n_new, pos0, g->vocab_begin,
                      g->vocab_begin + g->vocab_local);
    timer_end(e->tm, ev);
    if (e->tp->size > 1) {
        if (!e->tp->stream_ordered) e->be->ops->synchronize(e->be->ctx);
        double t0 = timer_host_seconds();
        comm_allreduce_sum(e->tp, x, (size_t)rows * e->m->cfg.embd);
        double t1 = timer_host_seconds();
        timer_add_host(e->tm, PHASE_TP_ALLREDUCE, step, mb, TIMER_NO_LAYER, t0, t1);
        timer_add_host(e->tm, PHASE_TP_WAIT, step, mb, TIMER_NO_LAYER, t0, t1);
    }
}

static void wait_timed(engine *e, comm *c, comm_req *req, phase p, int step, int mb) {
    if (!req->active) return;
    double t0 = timer_host_seconds();
    comm_wait(c, req);
    timer_add_host(e->tm, p, step, mb, TIMER_NO_LAYER, t0, timer_host_seconds());
}

/* Posts the receive of micro-batch mb's activations from the previous stage. An MPI receive is
 * posted at once, so the message can land while this stage computes. A stream-ordered comm
 * (NCCL) enqueues work that cannot be cancelled, so its receive is enqueued just before it is
 * waited on: the stream still overlaps it with queued compute, and a stop leaves nothing
 * behind. */
static void post_stage_recv(engine *e, float *buf, size_t count, int prev, int mb) {
    comm *ppc = e->pp;
    if (ppc->stream_ordered) {
        e->deferred_recv[mb] = buf;
        e->deferred_count[mb] = count;
        return;
    }
    ppc->ops->irecv(ppc->ctx, buf, count, COMM_FLOAT, prev, mb, &e->recv_req[mb]);
}

static void wait_stage_recv(engine *e, int prev, int step, int mb) {
    if (e->deferred_recv[mb]) {
        e->pp->ops->irecv(e->pp->ctx, e->deferred_recv[mb], e->deferred_count[mb], COMM_FLOAT, prev,
                          mb, &e->recv_req[mb]);
        e->deferred_recv[mb] = NULL;
    }
    wait_timed(e, e->pp, &e->recv_req[mb], PHASE_PP_RECV_WAIT, step, mb);
}

/* Leaves the step loop cleanly: sends finish, receives posted for a step that will never run
 * are cancelled (stream-ordered receives are deferred, so none of them is pending). */
static void drain_pending(engine *e) {
    for (int mb = 0; mb < e->split.n_micro; mb++) {
        comm_wait(e->pp, &e->send_req[mb][0]);
        comm_wait(e->pp, &e->send_req[mb][1]);
        comm_wait(e->pp_host, &e->tok_send_req[mb]);
        e->deferred_recv[mb] = NULL; /* never enqueued */
        comm_cancel(e->pp, &e->recv_req[mb]);
        comm_cancel(e->pp_host, &e->tok_recv_req[mb]);
    }
}

/* The stop vote of the previous step: 1 when some rank was signalled or saw non-finite
 * logits in it (then every rank records that step as nonfinite_step). *all_done: with an eos
 * id, no sequence of any replica was still running after it. */
static int stop_vote_finish(engine *e, int *all_done) {
    const int voted = e->vote_open;
    e->vote_open = 0;
    /* between steps, so tagged with the step voted on and no micro-batch */
    wait_timed(e, e->world, &e->stop_req, PHASE_STOP_WAIT, e->vote_step, -1);
    if (e->stop_vote[1] > 0 && e->nonfinite_step < 0) e->nonfinite_step = e->vote_step;
    *all_done = voted && e->cfg.stop_at_eos && e->stop_vote[2] == 0;
    return e->stop_vote[0] > 0 || e->stop_vote[1] > 0;
}

/* Sequences of this rank still generating: only the last stage knows, and every TP rank there
 * counts them alike (the sum only asks whether any is left). */
static int sequences_running(const engine *e) {
    if (!e->m->geom.last_stage || !e->cfg.stop_at_eos) return 0;
    int active = 0, running = 0;
    for (int mb = 0; mb < e->split.n_micro; mb++) active += e->split.size[mb];
    for (int s = 0; s < active; s++) running += !e->finished[s] && e->generated[s] < e->new_tokens;
    return running;
}

/* Finishes the previous step's vote, then starts this step's, a sum of the ranks' flags, in
 * flight while the next step computes. */
static int stop_agreed(engine *e, int step, int *all_done) {
    if (stop_vote_finish(e, all_done)) return 1;
    if (*all_done) return 0;
    e->stop_vote[0] = e->cfg.stop_flag && *e->cfg.stop_flag != 0 ? 1.0f : 0.0f;
    e->stop_vote[1] = e->step_nonfinite ? 1.0f : 0.0f;
    e->stop_vote[2] = (float)sequences_running(e);
    e->step_nonfinite = 0;
    e->vote_step = step;
    comm_iallreduce_sum(e->world, e->stop_vote, 3, &e->stop_req);
    e->vote_open = 1;
    return 0;
}

/* This micro-batch's input on this stage: on the first stage its tokens (sampled by the last
 * stage, in decode) embedded into x, once x's previous send has left; elsewhere the previous
 * stage's activations. */
static void stage_input(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    const shard_geom *g = &e->m->geom;
    if (!g->first_stage) {
        wait_stage_recv(e, g->pp_rank - 1, step, mb);
        return;
    }
    if (step > 0 && g->pp > 1) {
        wait_timed(e, e->pp_host, &e->tok_recv_req[mb], PHASE_PP_RECV_WAIT, step, mb);
        for (int b = 0; b < e->split.size[mb]; b++)
            e->tokens[(size_t)(e->split.begin[mb] + b) * e->total_len + pos0] = e->tok_recv[mb][b];
    }
    wait_timed(e, e->pp, &e->send_req[mb][e->slot[mb]], PHASE_PP_SEND, step, mb);
    embed_microbatch(e, x, mb, step, n_new, pos0);
}

/* Sends x to the next stage; x stays untouched while the send is in flight, so the
 * micro-batch's next step uses its other buffer. */
static void stage_send(engine *e, const float *x, int mb, int step, int n_new) {
    comm *ppc = e->pp;
    if (!ppc->stream_ordered) e->be->ops->synchronize(e->be->ctx);
    int ev = timer_begin(e->tm, PHASE_PP_SEND, step, mb, TIMER_NO_LAYER);
    ppc->ops->isend(ppc->ctx, x, (size_t)e->split.size[mb] * n_new * e->m->cfg.embd, COMM_FLOAT,
                    e->m->geom.pp_rank + 1, mb, &e->send_req[mb][e->slot[mb]]);
    timer_end(e->tm, ev);
    e->slot[mb] = 1 - e->slot[mb];
}

/* Posts what the micro-batch's next step will wait for, so it can land during other work:
 * the previous stage's activations, and on the first stage the last stage's tokens. */
static void post_next_receives(engine *e, int mb, int step) {
    const shard_geom *g = &e->m->geom;
    const int nb = e->split.size[mb];
    if (!g->first_stage) {
        wait_timed(e, e->pp, &e->send_req[mb][e->slot[mb]], PHASE_PP_SEND, step, mb);
        post_stage_recv(e, e->stage_buf[mb][e->slot[mb]], (size_t)nb * e->m->cfg.embd,
                        g->pp_rank - 1, mb);
    }
    if (g->first_stage && g->pp > 1)
        e->pp_host->ops->irecv(e->pp_host->ctx, e->tok_recv[mb], (size_t)nb, COMM_INT32,
                               g->pp - 1, TAG_TOKENS + mb, &e->tok_recv_req[mb]);
}

/* Last stage: the micro-batch's next tokens from its logits, stored and (with pp > 1) sent to
 * the first stage for the next step. */
static void sample_tokens(engine *e, int mb, int step, int steps) {
    const int nb = e->split.size[mb], T = e->prompt_len;
    int ev = timer_begin(e->tm, PHASE_SAMPLE, step, mb, TIMER_NO_LAYER);
    int32_t *chosen = e->tok_host;
    select_tokens(e, mb, step, T + step, chosen, &ev);
    timer_end(e->tm, ev);
    for (int b = 0; b < nb; b++) {
        const int s = e->split.begin[mb] + b, record = step < e->new_tokens;
        /* the token feeds the next step either way, a finished sequence's too; it counts only
         * after finite steps, and what is not counted reads -1 at the end (mark_not_generated) */
        if (record) e->tokens[(size_t)s * e->total_len + T + step] = chosen[b];
        if (e->finished[s]) continue; /* past its eos: computed, ignored, cannot stop the run */
        if (!e->row_finite[b]) e->step_nonfinite = 1;
        if (!record) continue;
        if (e->row_finite[b] && e->generated[s] == step) e->generated[s] = step + 1;
        if (e->cfg.stop_at_eos && chosen[b] == e->cfg.eos_id && e->generated[s] == step + 1)
            e->finished[s] = 1;
    }
    if (e->m->geom.pp > 1 && step + 1 < steps) {
        comm *tokc = e->pp_host; /* tokens are host data: plain MPI even when pp is NCCL */
        wait_timed(e, tokc, &e->tok_send_req[mb], PHASE_PP_SEND, step, mb);
        memcpy(e->tok_send[mb], chosen, (size_t)nb * sizeof(int32_t));
        tokc->ops->isend(tokc->ctx, e->tok_send[mb], (size_t)nb, COMM_INT32, 0, TAG_TOKENS + mb,
                         &e->tok_send_req[mb]);
    }
    if (mb == e->split.n_micro - 1) {
        e->token_time[step] = timer_host_seconds();
        if (step == 0) e->first_token_time = e->token_time[step];
    }
}

/* Clears the requests of the previous generation and posts the prefill's receives before any
 * compute. */
static void generation_start(engine *e, int iteration) {
    const shard_geom *g = &e->m->geom;
    e->stop_vote[0] = e->stop_vote[1] = e->stop_vote[2] = 0.0f;
    e->stop_req.active = 0;
    e->vote_open = 0;
    e->step_nonfinite = 0;
    e->nonfinite_step = -1;
    e->steps_run = 0;
    memset(e->generated, 0, (size_t)e->batch_local * sizeof(int32_t));
    memset(e->finished, 0, (size_t)e->batch_local);
    moe_routing_load_clear(&e->moe_host); /* the record holds the last generation */
    e->tm->iteration = iteration;
    e->first_token_time = 0.0;
    memset(e->send_req, 0, sizeof e->send_req);
    for (int mb = 0; mb < e->split.n_micro; mb++) {
        e->slot[mb] = 0;
        e->tok_send_req[mb].active = e->tok_recv_req[mb].active = e->recv_req[mb].active = 0;
        e->deferred_recv[mb] = NULL;
        if (!g->first_stage)
            post_stage_recv(e, e->stage_buf[mb][0],
                            (size_t)e->split.size[mb] * e->prompt_len * e->m->cfg.embd,
                            g->pp_rank - 1, mb);
    }
}

/* After a stop, or a sequence whose logits went non-finite: the positions past what each
 * sequence really generated read ENGINE_NOT_GENERATED, never a token id. */
static void mark_not_generated(engine *e) {
    for (int s = 0; s < e->batch_local; s++) {
        int32_t *row = e->tokens + (size_t)s * e->total_len + e->prompt_len;
        for (int i = e->generated[s]; i < e->new_tokens; i++) row[i] = ENGINE_NOT_GENERATED;
    }
}

/* Runs step `step`, whose logits were non-finite, once more with a finiteness check after the
 * embedding and after each residual add (forward.c), one micro-batch at a time with blocking
 * pipeline messages, and agrees over the world on the first site that went non-finite. Every
 * replica re-runs (none knows which one failed), so the only world collective is the final
 * reduction. The re-run is exact: the step rewrites the KV cache at its own positions with the
 * same values and attends to none beyond them, and its input tokens are still in `tokens`.
 * Only a failing run pays for it; no step of a healthy run is checked per layer. */
static void diagnose_step(engine *e, int step) {
    const shard_geom *g = &e->m->geom;
    const int T = e->prompt_len, n_new = step == 0 ? T : 1, pos0 = step == 0 ? 0 : T + step - 1;
    const timings_level level = e->tm->level;
    e->tm->level = TIMINGS_OFF; /* the re-run is not a measurement */
    e->diagnose = 1;
    e->diagnose_site = INT_MAX;
    e->capture = 0;
    for (int mb = 0; mb < e->split.n_micro; mb++) {
        float *x = e->stage_buf[mb][0];
        const size_t count = (size_t)e->split.size[mb] * n_new * e->m->cfg.embd;
        comm_req req = {0};
        if (g->first_stage) {
            embed_microbatch(e, x, mb, step, n_new, pos0);
        } else {
            e->pp->ops->irecv(e->pp->ctx, x, count, COMM_FLOAT, g->pp_rank - 1, TAG_DIAGNOSE + mb,
                              &req);
            comm_wait(e->pp, &req);
        }
        engine_stage_forward(e, x, mb, step, n_new, pos0);
        if (!g->last_stage) {
            if (!e->pp->stream_ordered) e->be->ops->synchronize(e->be->ctx);
            e->pp->ops->isend(e->pp->ctx, x, count, COMM_FLOAT, g->pp_rank + 1, TAG_DIAGNOSE + mb,
                              &req);
            comm_wait(e->pp, &req);
        }
    }
    for (int mb = e->split.n_micro; mb < e->ep_micro; mb++) engine_ep_idle(e, mb, step);
    e->be->ops->synchronize(e->be->ctx);
    e->diagnose = 0;
    e->tm->level = level;
    /* the smallest site over the world, as a MAX of its negation; none seen: the head */
    int neg = -e->diagnose_site;
    e->world->ops->allreduce(e->world->ctx, &neg, 1, COMM_INT32, COMM_OP_MAX);
    e->nonfinite_site = neg == -INT_MAX ? engine_site_mlp(e->m->cfg.layers - 1) + 1 : -neg;
}

int engine_generate(engine *e, int iteration, int capture) {
    const shard_geom *g = &e->m->geom;
    const int T = e->prompt_len, steps = e->new_tokens > 0 ? e->new_tokens : 1;
    int stopped = 0, all_done = 0;
    generation_start(e, iteration);
    for (int step = 0; step < steps && !stopped && !all_done; step++) {
        const int n_new = step == 0 ? T : 1, pos0 = step == 0 ? 0 : T + step - 1;
        e->capture = capture && step == 0; /* activations are recorded for the prefill only */
        for (int mb = 0; mb < e->split.n_micro; mb++) {
            int ev_step = timer_begin(e->tm, PHASE_STEP, step, mb, TIMER_NO_LAYER);
            float *x = e->stage_buf[mb][e->slot[mb]];
            stage_input(e, x, mb, step, n_new, pos0);
            engine_step_forward(e, x, mb, step, n_new, pos0);
            if (!g->last_stage) stage_send(e, x, mb, step, n_new);
            /* before the next receive may land in x; its own head rows leave the sampler's */
            if (g->last_stage && step == 0 && e->cfg.nll_first > 0) engine_nll_score(e, x, mb);
            if (step + 1 < steps) post_next_receives(e, mb, step);
            if (g->last_stage) sample_tokens(e, mb, step, steps);
            timer_end(e->tm, ev_step);
        }
        /* the EP group's wider replicas' micro-batches: this one's experts serve their rows */
        for (int mb = e->split.n_micro; mb < e->ep_micro; mb++) engine_ep_idle(e, mb, step);
        if (e->cfg.on_step) e->cfg.on_step(e->cfg.on_step_user, step);
        e->steps_run = step + 1;
        stopped = stop_agreed(e, step, &all_done);
    }
    drain_pending(e);
    stopped |= stop_vote_finish(e, &all_done);
    e->be->ops->synchronize(e->be->ctx);
    e->end_time = timer_host_seconds();
    if (e->nonfinite_step >= 0) diagnose_step(e, e->nonfinite_step);
    if (g->last_stage) mark_not_generated(e);
    if (e->cfg.nll_first > 0) engine_nll_finish(e);
    return stopped;
}
