// Batch loss, evaluation and prediction (see models/predict.h).
#include "models/predict.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

Var *batch_loss(Tape *t, Var *out, const Dataset *d, const uint32_t *idx, int n, float *scratch) {
    if (!out)
        return NULL;
    if (d->n_classes > 0) {
        int32_t *labels = (int32_t *)scratch;
        for (int i = 0; i < n; i++)
            labels[i] = d->y[idx ? idx[i] : (uint32_t)i];
        return ad_cross_entropy(t, out, labels);
    }
    for (int i = 0; i < n; i++)
        memcpy(scratch + (size_t)i * d->target_dim, d->target + (size_t)(idx ? idx[i] : (uint32_t)i) * d->target_dim,
               sizeof(float) * d->target_dim);
    Var *target = ad_from_host(t, scratch, out->t.ndim, out->t.shape, 0);
    return ad_mse(t, out, target);
}

// -- evaluation -----------------------------------------------------------------------
#define EVAL_BATCH 500

// Batches have fixed boundaries (multiples of EVAL_BATCH) and are dealt round-robin to
// threads; each batch's sums land in its own slot and are added in batch order, so the
// figures are bit-identical whatever the thread count.
typedef struct {
    double correct, loss_sum, abs_sum;
    double ape_sum, ape_count; // regression: Σ |ŷ−y|/|y| over targets y ≠ 0, and their count
} BatchSums;

typedef struct {
    const Model *m;
    const Dataset *d;
    const uint32_t *idx;
    int n, first, stride;  // batches first, first + stride, ...
    float *probs;          // optional output (n × outputs)
    BatchSums *sums;       // one per batch
    FpStatus st;
} EvalJob;

static void *eval_worker(void *arg) {
    EvalJob *j = arg;
    const Model *m = j->m;
    const Dataset *d = j->d;
    Tape *t = tape_create(m->be);
    size_t ss = dataset_sample_size(d);
    int outdim = d->n_classes ? d->n_classes : d->target_dim;
    float *scratch = malloc(sizeof(float) * ((size_t)EVAL_BATCH * (ss > (size_t)outdim ? ss : (size_t)outdim) + EVAL_BATCH));
    float *out_host = malloc(sizeof(float) * (size_t)EVAL_BATCH * outdim);
    Var **p = malloc(sizeof(Var *) * m->table.n_layers);
    uint32_t *ids = malloc(sizeof(uint32_t) * EVAL_BATCH);
    if (!t || !scratch || !out_host || !p || !ids) {
        j->st = FP_ENOMEM;
        goto out;
    }
    int n_batches = (j->n + EVAL_BATCH - 1) / EVAL_BATCH;
    for (int b = j->first; b < n_batches; b += j->stride) {
        int b0 = b * EVAL_BATCH, bs = j->n - b0 < EVAL_BATCH ? j->n - b0 : EVAL_BATCH;
        BatchSums *sum = &j->sums[b];
        for (int i = 0; i < bs; i++)
            ids[i] = j->idx ? j->idx[b0 + i] : (uint32_t)(b0 + i);
        tape_reset(t);
        model_param_vars(m, t, 0, p);
        Var *x = dataset_batch(t, d, ids, bs, scratch);
        Var *out = x ? model_forward(m, t, p, x, 0) : NULL;
        if (!out) {
            j->st = tape_status(t) == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED;
            goto out;
        }
        ad_to_host(t, out, out_host);
        for (int i = 0; i < bs; i++) {
            const float *o = out_host + (size_t)i * outdim;
            if (d->n_classes) {
                // Stable softmax in double: the loss and, when asked, the probabilities.
                int best = 0;
                double mx = o[0];
                for (int c = 1; c < outdim; c++)
                    if (o[c] > mx) {
                        mx = o[c];
                        best = c;
                    }
                double s = 0;
                for (int c = 0; c < outdim; c++)
                    s += exp(o[c] - mx);
                int y = d->y[ids[i]];
                sum->loss_sum += -(o[y] - mx - log(s));
                sum->correct += best == y;
                if (j->probs)
                    for (int c = 0; c < outdim; c++)
                        j->probs[(size_t)(b0 + i) * outdim + c] = (float)(exp(o[c] - mx) / s);
            } else {
                const float *tg = d->target + (size_t)ids[i] * d->target_dim;
                for (int c = 0; c < outdim; c++) {
                    double e = o[c] - tg[c];
                    sum->loss_sum += e * e / outdim;
                    sum->abs_sum += fabs(e) / outdim;
                    if (tg[c] != 0.0f) {
                        sum->ape_sum += fabs(e) / fabs((double)tg[c]);
                        sum->ape_count += 1;
                    }
                }
                if (j->probs)
                    memcpy(j->probs + (size_t)(b0 + i) * outdim, o, sizeof(float) * outdim);
            }
        }
    }
out:
    tape_free(t);
    free(scratch);
    free(out_host);
    free(p);
    free(ids);
    return NULL;
}

static FpStatus run_eval(const Model *m, const Dataset *d, const uint32_t *idx, int n, int threads, float *probs,
                         BatchSums *total, FpError *err) {
    if (m->be->device != DEVICE_CPU || threads < 1)
        threads = 1;
    if (threads > 16)
        threads = 16; // FED_MAX_THREADS (fl/fed.h): experiment_load and fed_create refuse more
    int n_batches = (n + EVAL_BATCH - 1) / EVAL_BATCH;
    BatchSums *sums = calloc((size_t)(n_batches ? n_batches : 1), sizeof(BatchSums));
    if (!sums)
        return fp_fail(err, FP_ENOMEM, "out of memory in evaluation");
    EvalJob jobs[16];
    pthread_t tid[16];
    int started[16] = {0};
    for (int k = 0; k < threads; k++)
        jobs[k] = (EvalJob){.m = m, .d = d, .idx = idx, .n = n, .first = k, .stride = threads, .probs = probs,
                            .sums = sums};
    for (int k = 1; k < threads; k++)
        started[k] = pthread_create(&tid[k], NULL, eval_worker, &jobs[k]) == 0;
    eval_worker(&jobs[0]);
    for (int k = 1; k < threads; k++) {
        if (started[k])
            pthread_join(tid[k], NULL);
        else
            eval_worker(&jobs[k]);
    }
    *total = (BatchSums){0};
    FpStatus st = FP_OK;
    for (int k = 0; k < threads; k++)
        if (jobs[k].st != FP_OK && st == FP_OK)
            st = fp_fail(err, jobs[k].st, "evaluation failed: %s", fp_status_name(jobs[k].st));
    for (int b = 0; b < n_batches; b++) {
        total->correct += sums[b].correct;
        total->loss_sum += sums[b].loss_sum;
        total->abs_sum += sums[b].abs_sum;
        total->ape_sum += sums[b].ape_sum;
        total->ape_count += sums[b].ape_count;
    }
    free(sums);
    return st;
}

FpStatus model_evaluate(const Model *m, const Dataset *d, int threads, double *accuracy, double *loss, double *mae,
                        FpError *err) {
    if (d->n <= 0)
        return fp_fail(err, FP_EPARAM, "evaluation set %s is empty", d->name);
    BatchSums total;
    FP_TRY(run_eval(m, d, NULL, d->n, threads, NULL, &total, err));
    if (accuracy)
        *accuracy = d->n_classes ? total.correct / d->n : NAN;
    if (loss)
        *loss = total.loss_sum / d->n;
    if (mae)
        *mae = d->n_classes ? NAN : total.abs_sum / d->n;
    return FP_OK;
}

FpStatus model_evaluate_regression(const Model *m, const Dataset *d, int threads, double *mse, double *mae,
                                   double *mape, FpError *err) {
    if (d->n <= 0)
        return fp_fail(err, FP_EPARAM, "evaluation set %s is empty", d->name);
    if (d->n_classes)
        return fp_fail(err, FP_EPARAM, "%s is a classification set: no regression metrics", d->name);
    BatchSums total;
    FP_TRY(run_eval(m, d, NULL, d->n, threads, NULL, &total, err));
    if (mse)
        *mse = total.loss_sum / d->n;
    if (mae)
        *mae = total.abs_sum / d->n;
    if (mape)
        *mape = total.ape_count ? total.ape_sum / total.ape_count : NAN;
    return FP_OK;
}

FpStatus model_predict(const Model *m, const Dataset *d, const uint32_t *idx, int n, float *probs, FpError *err) {
    BatchSums total;
    return run_eval(m, d, idx, idx ? n : d->n, 2, probs, &total, err);
}
