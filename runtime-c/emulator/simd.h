/* CPE vector types and intrinsics (the SDK's simd.h) for programs built against the swflow
 * emulator, in portable C with GCC vector extensions: floatv4 (SW26010, 16 bytes in memory)
 * and floatv8 (SW26010-Pro, 32 bytes). The loads and stores take the vector first and the
 * pointer second, as the SDK's do; simd_vmas rounds each lane once (fmaf), as the hardware's
 * fused multiply-add does. */
#ifndef SWFLOW_EMULATOR_SIMD_H
#define SWFLOW_EMULATOR_SIMD_H

#include <math.h>
#include <string.h>

typedef float floatv4 __attribute__((vector_size(16)));
typedef float floatv8 __attribute__((vector_size(32)));

/* Lanes from p on (any alignment). */
#define simd_loadu(v, p) memcpy(&(v), (p), sizeof(v))
#define simd_storeu(v, p) memcpy((p), &(v), sizeof(v))

/* Stops the program with a failure the running kernel detected (the emulator's). */
void swflow_emu_fail(const char *message);

/* p, after checking that it is a multiple of `bytes`, as the hardware's aligned vector loads
 * and stores require. */
static inline const void *swflow_emu_aligned(const void *p, unsigned long bytes)
{
    if ((unsigned long)p % bytes != 0)
        swflow_emu_fail("an aligned vector load or store (simd_load, simd_store) at an address "
                        "that is not a multiple of the vector's bytes");
    return p;
}

/* Lanes from p on, p a multiple of the vector's bytes. */
#define simd_load(v, p) memcpy(&(v), swflow_emu_aligned((p), sizeof(v)), sizeof(v))
#define simd_store(v, p) memcpy((void *)swflow_emu_aligned((p), sizeof(v)), &(v), sizeof(v))
/* The element at p in every lane. */
#define simd_loade(v, p) ((v) = (__typeof__(v)){0} + *(p))
/* a * b + c, lane by lane, each rounded once. */
#define simd_vmas(a, b, c)                                                                 \
    (__extension__({                                                                       \
        __typeof__(c) swflow_a_ = (a), swflow_b_ = (b), swflow_c_ = (c);                   \
        for (unsigned swflow_i_ = 0; swflow_i_ < sizeof swflow_c_ / sizeof(float); swflow_i_++) \
            swflow_c_[swflow_i_] = fmaf(swflow_a_[swflow_i_], swflow_b_[swflow_i_], swflow_c_[swflow_i_]); \
        swflow_c_;                                                                         \
    }))

/* The square root of every lane, correctly rounded (sqrtf). */
#define simd_vsqrts(a)                                                                     \
    (__extension__({                                                                       \
        __typeof__(a) swflow_r_ = (a);                                                     \
        for (unsigned swflow_i_ = 0; swflow_i_ < sizeof swflow_r_ / sizeof(float); swflow_i_++) \
            swflow_r_[swflow_i_] = sqrtf(swflow_r_[swflow_i_]);                            \
        swflow_r_;                                                                         \
    }))

/* The lanes in argument order. */
#define simd_set_floatv4(a, b, c, d) ((floatv4){(a), (b), (c), (d)})
#define simd_set_floatv8(a, b, c, d, e, f, g, h) ((floatv8){(a), (b), (c), (d), (e), (f), (g), (h)})
/* 2.0 where a <= b, else 0 (NaN compares false), lane by lane. */
#define simd_vfcmple(a, b)                                                                 \
    (__extension__({                                                                       \
        __typeof__(a) swflow_x_ = (a), swflow_y_ = (b), swflow_r_;                         \
        for (unsigned swflow_i_ = 0; swflow_i_ < sizeof swflow_r_ / sizeof(float); swflow_i_++) \
            swflow_r_[swflow_i_] = swflow_x_[swflow_i_] <= swflow_y_[swflow_i_] ? 2.0f : 0.0f; \
        swflow_r_;                                                                         \
    }))
/* c <= 0 ? a : b, lane by lane. */
#define simd_vselle(c, a, b)                                                               \
    (__extension__({                                                                       \
        __typeof__(a) swflow_c_ = (c), swflow_a_ = (a), swflow_b_ = (b), swflow_s_;        \
        for (unsigned swflow_i_ = 0; swflow_i_ < sizeof swflow_s_ / sizeof(float); swflow_i_++) \
            swflow_s_[swflow_i_] = swflow_c_[swflow_i_] <= 0 ? swflow_a_[swflow_i_] : swflow_b_[swflow_i_]; \
        swflow_s_;                                                                         \
    }))

#ifndef SWFLOW_CRTS
#include "swflow_emu.h"

/* Register communication (SW26010 only; SW26010-Pro has remote LDM access instead): a put
 * sends the register along the row (putr) or column (putc) to index dst of it, 8 to all the
 * others; a get returns the oldest message of the row or column, of the argument's type. */
#define swflow_regcomm_put_(line, v, dst)                                                  \
    (__extension__({                                                                       \
        __typeof__(v) swflow_v_ = (v);                                                     \
        swflow_emu_regcomm_put((line), &swflow_v_, sizeof swflow_v_, (dst));               \
    }))
#define swflow_regcomm_get_(line, v)                                                       \
    (__extension__({                                                                       \
        __typeof__(v) swflow_v_;                                                           \
        swflow_emu_regcomm_get((line), &swflow_v_, sizeof swflow_v_);                      \
        swflow_v_;                                                                         \
    }))
#define simd_putr(v, dst) swflow_regcomm_put_(0, v, dst)
#define simd_putc(v, dst) swflow_regcomm_put_(1, v, dst)
#define simd_getr(v) swflow_regcomm_get_(0, v)
#define simd_getc(v) swflow_regcomm_get_(1, v)
#endif

#endif
