/* The SW26010 SDK's simd.h (CPE side, `sw5cc -slave -msimd`) as the generated code uses it,
 * for `make check-sunway`: floatv4 holds four f32 lanes (16 bytes in memory). The loads and
 * stores assign their first argument, so they are written here as macros over typed
 * declarations; see reference/simd.md. Declarations only. */
#ifndef SWFLOW_SDK_SIMD_H
#define SWFLOW_SDK_SIMD_H

typedef float floatv4 __attribute__((vector_size(16)));

floatv4 swflow_sdk_loadu(const float *p);
floatv4 swflow_sdk_loade(const float *p);
void swflow_sdk_storeu(floatv4 v, float *p);

#define simd_loadu(v, p) ((v) = swflow_sdk_loadu(p))
#define simd_loade(v, p) ((v) = swflow_sdk_loade(p))
#define simd_storeu(v, p) swflow_sdk_storeu((v), (p))
floatv4 simd_vmas(floatv4 a, floatv4 b, floatv4 c);
floatv4 simd_set_floatv4(float a, float b, float c, float d);
floatv4 simd_vfcmple(floatv4 a, floatv4 b);
floatv4 simd_vselle(floatv4 c, floatv4 a, floatv4 b);
/* Register communication: send along the row or column (dst 0-7, or 8 for all the others),
 * receive the oldest message (the argument only gives the type). */
void simd_putr(floatv4 v, int dst);
void simd_putc(floatv4 v, int dst);
floatv4 simd_getr(floatv4 v);
floatv4 simd_getc(floatv4 v);

#endif
