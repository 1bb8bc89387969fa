// Internals shared by core/tape.c and core/ops*.c (not a public API).
#ifndef FEDPRIV_CORE_TAPE_INTERNAL_H
#define FEDPRIV_CORE_TAPE_INTERNAL_H

#include "core/autodiff.h"

// A new Var of the given shape with arena memory for its value, recorded on the tape
// with op and inputs; requires_grad is set when recording is on and an input needs it.
Var *tape_new_var(Tape *t, OpKind op, Var *a, Var *b, int ndim, const int *shape);
// A Var that views existing memory (reshape).
Var *tape_new_view(Tape *t, OpKind op, Var *a, float *data, int ndim, const int *shape);
int tape_grad_enabled(const Tape *t);
void tape_set_grad_enabled(Tape *t, int on);
int tape_node_count(const Tape *t);
Var *tape_node(const Tape *t, int i);

// The backward rule of v: gradients for v->in[0] and v->in[1] given g = dL/dv, built from
// differentiable ops. Either output may be NULL (no gradient flows there).
void op_backward(Tape *t, Var *v, Var *g, Var **g0, Var **g1);

#endif
