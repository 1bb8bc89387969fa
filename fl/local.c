// Local training on one backend: minibatch SGD over a client's samples, each step's
// gradient the minibatch mean or what the defense's local_gradient slot returns.
#include <stdlib.h>
#include <string.h>

#include "fl/fed.h"

long local_train_steps(const LocalTrainConfig *cfg, int n) {
    if (n <= 0)
        return 0;
    int B = cfg->batch_size < n ? cfg->batch_size : n;
    return cfg->steps > 0 ? cfg->steps : (long)cfg->epochs * ((n + B - 1) / B);
}

FpStatus local_train(Model *m, Tape *t, const Dataset *d, const uint32_t *idx, int n, const LocalTrainConfig *cfg,
                     RngStream *shuffle, float *momentum_buf, FpError *err) {
    const Backend *be = m->be;
    int B = cfg->batch_size < n ? cfg->batch_size : n;
    size_t ss = dataset_sample_size(d);
    size_t scratch_n = (size_t)B * (ss > (size_t)d->target_dim ? ss : (size_t)d->target_dim) + B;
    float *scratch = malloc(scratch_n * sizeof(float));
    uint32_t *order = malloc(sizeof(uint32_t) * (size_t)n);
    int L = m->table.n_layers;
    Var **p = malloc(sizeof(Var *) * L * 2);
    FpStatus st = FP_OK;
    // A defense that wraps each step (DP-SGD) writes the step's gradient here (device).
    int wrapped = cfg->defense && cfg->defense->local_gradient;
    float *grad = wrapped ? be->alloc(m->table.n_params * sizeof(float)) : NULL;
    if (!scratch || !order || !p || (wrapped && !grad)) {
        st = fp_fail(err, FP_ENOMEM, "out of memory in local training");
        goto out;
    }
    if (cfg->momentum != 0)
        be->fill(momentum_buf, m->table.n_params, 0.0f);
    long total = local_train_steps(cfg, n);
    int pos = n; // forces a shuffle before the first step
    for (long step = 0; step < total; step++) {
        if (pos >= n) {
            memcpy(order, idx, sizeof(uint32_t) * (size_t)n);
            rng_shuffle_u32(shuffle, order, (uint32_t)n);
            pos = 0;
        }
        int bs = n - pos < B ? n - pos : B;
        tape_reset(t);
        Var **g = p + L;
        if (wrapped) {
            DefenseLocalStep ls = {.round = cfg->round, .step = step, .steps = total, .model = m, .tape = t,
                                   .data = d, .idx = order + pos, .n = bs};
            be->fill(grad, m->table.n_params, 0.0f);
            st = cfg->defense->local_gradient(cfg->defense_state, &ls, grad, err);
            if (st != FP_OK)
                goto out;
        } else {
            if (model_param_vars(m, t, 1, p) != FP_OK) {
                st = fp_fail(err, FP_ENOMEM, "out of memory in local training");
                goto out;
            }
            Var *x = dataset_batch(t, d, order + pos, bs, scratch);
            Var *out = x ? model_forward(m, t, p, x, 1) : NULL;
            Var *loss = batch_loss(t, out, d, order + pos, bs, scratch);
            if (!loss || ad_grad(t, loss, p, L, g, 0) != FP_OK) {
                st = fp_fail(err, tape_status(t) == FP_ENOMEM ? FP_ENOMEM : FP_EUNSUPPORTED,
                             "local training failed: %s",
                             tape_status(t) == FP_ENOMEM ? "out of memory" : "bad model graph");
                goto out;
            }
        }
        // One SGD step per trainable layer, straight from the gradient's memory (tape or grad).
        for (int i = 0; i < L; i++) {
            const ParamLayer *l = &m->table.layers[i];
            if (l->trainable)
                be->sgd_step(l->count, m->params + l->offset, wrapped ? grad + l->offset : g[i]->t.data,
                             momentum_buf + l->offset, (float)cfg->lr, (float)cfg->momentum,
                             (float)cfg->weight_decay);
        }
        pos += bs;
    }
out:
    if (grad)
        be->free(grad);
    free(scratch);
    free(order);
    free(p);
    return st;
}

