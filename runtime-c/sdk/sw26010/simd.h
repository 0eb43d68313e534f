/* The SW26010 SDK's simd.h (CPE side, `sw5cc -slave -msimd`) as the generated code uses it,
 * for `make check-sunway`: floatv4 holds four f32 lanes (16 bytes in memory), doublev4 four
 * f64 (32 bytes, a whole register). The loads and
 * stores assign their first argument, so they are written here as macros over typed
 * declarations; see reference/simd.md. Declarations only. */
#ifndef SWFLOW_SDK_SIMD_H
#define SWFLOW_SDK_SIMD_H

typedef float floatv4 __attribute__((vector_size(16)));
typedef double doublev4 __attribute__((vector_size(32)));

/* The unaligned loads and stores take any vector type (floatv4 for data, doublev4 as 32 raw
 * bytes for register communication), its elements' pointer second. */
const void *swflow_sdk_load_from(const void *p);
void *swflow_sdk_store_to(void *p);
floatv4 swflow_sdk_loade(const float *p);

#define simd_loadu(v, p) ((v) = *(const __typeof__(v) *)swflow_sdk_load_from(p))
#define simd_loade(v, p) ((v) = swflow_sdk_loade(p))
#define simd_storeu(v, p) ((void)(*(__typeof__(v) *)swflow_sdk_store_to(p) = (v)))
/* The aligned forms (floatv4: 16-byte aligned addresses). */
#define simd_load(v, p) ((v) = *(const __typeof__(v) *)swflow_sdk_load_from(p))
#define simd_store(v, p) ((void)(*(__typeof__(v) *)swflow_sdk_store_to(p) = (v)))
floatv4 simd_vmas(floatv4 a, floatv4 b, floatv4 c);
floatv4 simd_set_floatv4(float a, float b, float c, float d);
floatv4 simd_vfcmple(floatv4 a, floatv4 b);
floatv4 simd_vselle(floatv4 c, floatv4 a, floatv4 b);
floatv4 simd_vsqrts(floatv4 a);
/* Register communication, for any 256-bit vector: send along the row or column (dst 0-7, or
 * 8 for all the others); receive the oldest message, of the argument's type. */
void swflow_sdk_put(const void *v, int dst);
const void *swflow_sdk_get(void);
#define simd_putr(v, dst) (__extension__({ __typeof__(v) swflow_put_ = (v); swflow_sdk_put(&swflow_put_, (dst)); }))
#define simd_putc(v, dst) (__extension__({ __typeof__(v) swflow_put_ = (v); swflow_sdk_put(&swflow_put_, (dst)); }))
#define simd_getr(v) (*(const __typeof__(v) *)swflow_sdk_get())
#define simd_getc(v) (*(const __typeof__(v) *)swflow_sdk_get())

#endif
