// The tape: an arena of Vars and their values, and the reverse sweep (ad_grad).
// Creation order is a topological order, so the sweep walks the tape backwards.
#include <stdlib.h>
#include <string.h>

#include "core/tape_internal.h"

#define ARENA_CHUNK ((size_t)64 << 20)
#define ARENA_ALIGN 256
#define VAR_BLOCK 4096

typedef struct Chunk {
    char *base;
    size_t size, used;
} Chunk;

struct Tape {
    const Backend *be;
    Chunk *chunks;
    int n_chunks, cap_chunks, cur_chunk;
    Var **var_blocks; // blocks of VAR_BLOCK Vars
    int n_var_blocks;
    Var **nodes;
    int n_nodes, cap_nodes;
    int grad_enabled;
    FpStatus status;
};

Tape *tape_create(const Backend *be) {
    Tape *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->be = be;
    t->grad_enabled = 1;
    return t;
}

void tape_free(Tape *t) {
    if (!t)
        return;
    for (int i = 0; i < t->n_chunks; i++)
        t->be->free(t->chunks[i].base);
    for (int i = 0; i < t->n_var_blocks; i++)
        free(t->var_blocks[i]);
    free(t->chunks);
    free(t->var_blocks);
    free(t->nodes);
    free(t);
}

void tape_reset(Tape *t) {
    for (int i = 0; i < t->n_chunks; i++)
        t->chunks[i].used = 0;
    t->cur_chunk = 0;
    t->n_nodes = 0;
    t->grad_enabled = 1;
    t->status = FP_OK;
}

const Backend *tape_backend(const Tape *t) { return t->be; }
FpStatus tape_status(const Tape *t) { return t->status; }
int tape_grad_enabled(const Tape *t) { return t->grad_enabled; }
void tape_set_grad_enabled(Tape *t, int on) { t->grad_enabled = on; }
int tape_node_count(const Tape *t) { return t->n_nodes; }
Var *tape_node(const Tape *t, int i) { return t->nodes[i]; }

size_t tape_arena_bytes(const Tape *t) {
    size_t s = 0;
    for (int i = 0; i < t->n_chunks; i++)
        s += t->chunks[i].size;
    return s;
}

void *tape_alloc(Tape *t, size_t bytes) {
    bytes = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (bytes == 0)
        bytes = ARENA_ALIGN;
    for (; t->cur_chunk < t->n_chunks; t->cur_chunk++) {
        Chunk *c = &t->chunks[t->cur_chunk];
        if (c->size - c->used >= bytes) {
            void *p = c->base + c->used;
            c->used += bytes;
            return p;
        }
    }
    if (t->n_chunks == t->cap_chunks) {
        int cap = t->cap_chunks ? 2 * t->cap_chunks : 8;
        Chunk *nc = realloc(t->chunks, sizeof(Chunk) * cap);
        if (!nc) {
            t->status = FP_ENOMEM;
            return NULL;
        }
        t->chunks = nc;
        t->cap_chunks = cap;
    }
    size_t size = bytes > ARENA_CHUNK ? bytes : ARENA_CHUNK;
    char *base = t->be->alloc(size);
    if (!base) {
        t->status = FP_ENOMEM;
        return NULL;
    }
    t->chunks[t->n_chunks] = (Chunk){base, size, bytes};
    t->cur_chunk = t->n_chunks++;
    return base;
}

static Var *new_node(Tape *t) {
    if (t->n_nodes == t->cap_nodes) {
        int cap = t->cap_nodes ? 2 * t->cap_nodes : 1024;
        Var **nn = realloc(t->nodes, sizeof(Var *) * cap);
        if (!nn)
            return NULL;
        t->nodes = nn;
        t->cap_nodes = cap;
    }
    int block = t->n_nodes / VAR_BLOCK;
    if (block == t->n_var_blocks) {
        Var **nb = realloc(t->var_blocks, sizeof(Var *) * (block + 1));
        if (!nb)
            return NULL;
        t->var_blocks = nb;
        t->var_blocks[block] = malloc(sizeof(Var) * VAR_BLOCK);
        if (!t->var_blocks[block])
            return NULL;
        t->n_var_blocks++;
    }
    Var *v = &t->var_blocks[block][t->n_nodes % VAR_BLOCK];
    memset(v, 0, sizeof *v);
    v->id = t->n_nodes;
    t->nodes[t->n_nodes++] = v;
    return v;
}

static void set_shape(Var *v, int ndim, const int *shape) {
    v->t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        v->t.shape[i] = shape[i];
    v->t.numel = shape_numel(ndim, shape);
}

Var *tape_new_view(Tape *t, OpKind op, Var *a, float *data, int ndim, const int *shape) {
    Var *v = new_node(t);
    if (!v) {
        t->status = FP_ENOMEM;
        return NULL;
    }
    set_shape(v, ndim, shape);
    v->t.data = data;
    v->op = op;
    v->in[0] = a;
    v->requires_grad = t->grad_enabled && a && a->requires_grad;
    return v;
}

Var *tape_new_var(Tape *t, OpKind op, Var *a, Var *b, int ndim, const int *shape) {
    size_t n = shape_numel(ndim, shape);
    float *data = tape_alloc(t, n * sizeof(float));
    if (!data)
        return NULL;
    Var *v = new_node(t);
    if (!v) {
        t->status = FP_ENOMEM;
        return NULL;
    }
    set_shape(v, ndim, shape);
    v->t.data = data;
    v->op = op;
    v->in[0] = a;
    v->in[1] = b;
    v->requires_grad = t->grad_enabled && ((a && a->requires_grad) || (b && b->requires_grad));
    return v;
}

Var *ad_leaf(Tape *t, float *data, int ndim, const int *shape, int requires_grad) {
    Var *v = tape_new_view(t, OP_LEAF, NULL, data, ndim, shape);
    if (v)
        v->requires_grad = requires_grad;
    return v;
}

Var *ad_empty(Tape *t, int ndim, const int *shape) { return tape_new_var(t, OP_LEAF, NULL, NULL, ndim, shape); }

Var *ad_full(Tape *t, int ndim, const int *shape, float value) {
    Var *v = ad_empty(t, ndim, shape);
    if (v)
        t->be->fill(v->t.data, v->t.numel, value);
    return v;
}

Var *ad_from_host(Tape *t, const float *host, int ndim, const int *shape, int requires_grad) {
    Var *v = ad_empty(t, ndim, shape);
    if (!v)
        return NULL;
    t->be->upload(v->t.data, host, v->t.numel * sizeof(float));
    v->requires_grad = requires_grad;
    return v;
}

double ad_item(Tape *t, const Var *v) {
    float x;
    t->be->download(&x, v->t.data, sizeof x);
    return x;
}

void ad_to_host(Tape *t, const Var *v, float *host) { t->be->download(host, v->t.data, v->t.numel * sizeof(float)); }

// During a sweep, v->grad == v marks a node that no requested wrt variable flows into
// (no path leads from a wrt[k] to it): its gradient would never reach an output, so it
// is neither accumulated nor propagated, and the backward rules (core/ops.c, needs())
// skip computing it. A node's gradient is always a newer node, never the node itself,
// so the mark cannot be mistaken for a gradient.
static int pruned(const Var *v) { return v->grad == v; }

static void accumulate(Tape *t, Var *target, Var *g) {
    if (!target || !g || !target->requires_grad || pruned(target))
        return;
    if (g->t.numel != target->t.numel) {
        t->status = FP_EUNSUPPORTED; // a backward rule produced a wrong shape: a bug
        return;
    }
    target->grad = target->grad ? ad_add(t, target->grad, g) : g;
}

// Marks (see pruned()) every node up to y that does not depend on any of wrt[0..n).
// Creation order is a topological order, so one forward pass suffices. Pruning changes
// nothing in what is computed for the wanted nodes (same rules, same order of
// accumulation), so the results are bit-identical; it only skips work, e.g. the input
// gradient of a network's first layer when only parameter gradients are asked for.
static int mark_pruned(Tape *t, Var *y, Var *const *wrt, int n) {
    for (int i = 0; i <= y->id; i++)
        t->nodes[i]->grad = t->nodes[i];
    for (int k = 0; k < n; k++)
        if (wrt[k] && wrt[k]->id <= y->id && t->nodes[wrt[k]->id] == wrt[k])
            wrt[k]->grad = NULL;
    for (int i = 0; i <= y->id; i++) {
        Var *v = t->nodes[i];
        if (pruned(v) && ((v->in[0] && !pruned(v->in[0])) || (v->in[1] && !pruned(v->in[1]))))
            v->grad = NULL;
    }
    return !pruned(y);
}

FpStatus ad_grad(Tape *t, Var *y, Var *const *wrt, int n, Var **out, int create_graph) {
    if (!y)
        return t->status != FP_OK ? t->status : FP_ENOMEM;
    int live = mark_pruned(t, y, wrt, n);
    int saved = t->grad_enabled;
    t->grad_enabled = 0;
    if (live)
        y->grad = ad_full(t, y->t.ndim, y->t.shape, 1.0f);
    t->grad_enabled = create_graph;
    for (int i = live ? y->id : -1; i >= 0; i--) {
        Var *v = t->nodes[i];
        if (!v->grad || pruned(v) || v->op == OP_LEAF || !v->requires_grad)
            continue;
        // Nothing to propagate when no input leads to a wrt (v itself may be one).
        if (!((v->in[0] && !pruned(v->in[0])) || (v->in[1] && !pruned(v->in[1]))))
            continue;
        Var *g0 = NULL, *g1 = NULL;
        op_backward(t, v, v->grad, &g0, &g1);
        if (t->status != FP_OK)
            break;
        accumulate(t, v->in[0], g0);
        accumulate(t, v->in[1], g1);
    }
    for (int i = 0; i <= y->id; i++)
        if (pruned(t->nodes[i]))
            t->nodes[i]->grad = NULL;
    for (int k = 0; k < n; k++) {
        Var *w = wrt[k];
        out[k] = (w && w->grad && w->id <= y->id) ? w->grad : (w ? ad_full(t, w->t.ndim, w->t.shape, 0.0f) : NULL);
        if (out[k] && out[k]->t.ndim != w->t.ndim)
            out[k] = ad_reshape(t, out[k], w->t.ndim, w->t.shape);
    }
    t->grad_enabled = saved;
    return t->status;
}
