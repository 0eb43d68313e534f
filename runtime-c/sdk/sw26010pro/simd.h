/* The SW26010-Pro SDK's simd.h (CPE side, `swgcc -mslave -msimd`) as the generated code uses it,
 * for `make check-sunway-pro`: floatv8 holds eight f32 lanes. The loads and
 * stores assign their first argument, so they are written here as macros over typed
 * declarations; see reference/simd.md. Declarations only. The compare and select
 * (simd_vfcmple, simd_vselle) and the square root (simd_vsqrts) are documented for SW26010;
 * that the Pro keeps their names and argument order, as it does the rest of the header's, is
 * inferred. */
#ifndef SWFLOW_SDK_SIMD_H
#define SWFLOW_SDK_SIMD_H

typedef float floatv8 __attribute__((vector_size(32)));

floatv8 swflow_sdk_loadu(const float *p);
floatv8 swflow_sdk_loade(const float *p);
void swflow_sdk_storeu(floatv8 v, float *p);

#define simd_loadu(v, p) ((v) = swflow_sdk_loadu(p))
#define simd_loade(v, p) ((v) = swflow_sdk_loade(p))
#define simd_storeu(v, p) swflow_sdk_storeu((v), (p))
/* The aligned forms (floatv8: 32-byte aligned addresses). */
floatv8 swflow_sdk_load(const float *p);
void swflow_sdk_store(floatv8 v, float *p);
#define simd_load(v, p) ((v) = swflow_sdk_load(p))
#define simd_store(v, p) swflow_sdk_store((v), (p))
floatv8 simd_vmas(floatv8 a, floatv8 b, floatv8 c);
floatv8 simd_set_floatv8(float a, float b, float c, float d, float e, float f, float g, float h);
floatv8 simd_vfcmple(floatv8 a, floatv8 b);
floatv8 simd_vselle(floatv8 c, floatv8 a, floatv8 b);
floatv8 simd_vsqrts(floatv8 a);

#endif
