// A float's bits and back (memcpy, the defined way to reinterpret them), for code that
// builds floats from their fields: the CPU backend's exponential (core/cpu/cpu_kernels.h)
// and the mechanisms' samplers (defenses/dp/mech_internal.h).
#ifndef FEDPRIV_CORE_FLOAT_BITS_H
#define FEDPRIV_CORE_FLOAT_BITS_H

#include <stdint.h>
#include <string.h>

static inline float float_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t float_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

#endif
