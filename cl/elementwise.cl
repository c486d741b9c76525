/* Element-wise ops over f32 activations. Each work-item owns VEC consecutive elements and
 * handles them as one float8 (PoCL does not vectorise the scalar form of these kernels across
 * work-items: measured 3x slower for silu); the last, partial vector goes element by element.
 * The host launches ceil(count / VEC) items rounded up to the local size. In-place use (y == a)
 * is allowed: each item reads its own elements before writing them.
 *   add        y[i] = a[i] + b[i % b_count]   (b broadcasts: bias rows)
 *   gelu       tanh approximation
 *   swiglu     y[i] = silu(a[i]) * b[i]
 *   geglu      y[i] = gelu(a[i]) * b[i]
 *   swiglu_oai y[i] = gpt-oss's clamped silu(a[i]) * (b[i] + 1) (glu.clh)
 *   scale      y[i] = a[i] * s, capped to c * tanh(y / c) where c > 0 (SOFTCAP)
 *   store_f32, store_f16  KV cache writes; f16 through vstore_half_rte, so no cl_khr_fp16 */

#define VEC 8

#include "glu.clh"

__kernel void gelu(__global const float *a, ulong a_off, __global float *y, ulong y_off,
                   ulong count) {
    size_t i = get_global_id(0) * VEC;
    __global const float *ap = a + a_off;
    __global float *yp = y + y_off;
    if (i + VEC <= count) {
        float8 x = vload8(0, ap + i);
        vstore8(GELU(x), 0, yp + i);
    } else {
        for (; i < count; i++) {
            float x = ap[i];
            yp[i] = GELU(x);
        }
    }
}

/* b[i % b_count]: one modulo per vector; the vector form needs the 8 b elements not to wrap. */
__kernel void add(__global const float *a, ulong a_off, __global const float *b, ulong b_off,
                  ulong b_count, __global float *y, ulong y_off, ulong count) {
    size_t i = get_global_id(0) * VEC;
    if (i >= count) return;
    __global const float *ap = a + a_off, *bp = b + b_off;
    __global float *yp = y + y_off;
    size_t j = i % b_count;
    if (i + VEC <= count && j + VEC <= b_count) {
        vstore8(vload8(0, ap + i) + vload8(0, bp + j), 0, yp + i);
    } else {
        for (size_t end = min(i + VEC, (size_t)count); i < end; i++) {
            yp[i] = ap[i] + bp[j];
            j = j + 1 == b_count ? 0 : j + 1;
        }
    }
}

/* swiglu (fn 0), geglu (fn 1) and swiglu_oai (fn 2): glu.clh's GLU */
#define GLU_KERNEL(name, fn)                                                                       \
    __kernel void name(__global const float *a, ulong a_off, __global const float *b,             \
                       ulong b_off, __global float *y, ulong y_off, ulong count) {                \
        size_t i = get_global_id(0) * VEC;                                                         \
        __global const float *ap = a + a_off, *bp = b + b_off;                                     \
        __global float *yp = y + y_off;                                                            \
        if (i + VEC <= count) {                                                                    \
            float8 x = vload8(0, ap + i);                                                          \
            vstore8(GLU(x, vload8(0, bp + i), fn), 0, yp + i);                                     \
        } else {                                                                                   \
            for (; i < count; i++) {                                                               \
                float x = ap[i];                                                                   \
                yp[i] = GLU(x, bp[i], fn);                                                         \
            }                                                                                      \
        }                                                                                          \
    }

GLU_KERNEL(swiglu, 0)
GLU_KERNEL(geglu, 1)
GLU_KERNEL(swiglu_oai, 2)

__kernel void scale(__global const float *a, ulong a_off, __global float *y, ulong y_off,
                    ulong count, float s, float c) {
    size_t i = get_global_id(0) * VEC;
    __global const float *ap = a + a_off;
    __global float *yp = y + y_off;
    if (i + VEC <= count) {
        float8 x = vload8(0, ap + i) * s;
        vstore8(SOFTCAP(x, c), 0, yp + i);
    } else {
        for (; i < count; i++) {
            float x = ap[i] * s;
            yp[i] = SOFTCAP(x, c);
        }
    }
}

__kernel void store_f32(__global const float *src, ulong src_off, __global float *dst,
                        ulong dst_off, ulong count) {
    size_t i = get_global_id(0) * VEC;
    if (i + VEC <= count)
        vstore8(vload8(0, src + src_off + i), 0, dst + dst_off + i);
    else
        for (; i < count; i++)
            dst[dst_off + i] = src[src_off + i];
}

__kernel void store_f16(__global const float *src, ulong src_off, __global half *dst, ulong dst_off,
                        ulong count) {
    size_t i = get_global_id(0) * VEC;
    if (i + VEC <= count)
        vstore_half8_rte(vload8(0, src + src_off + i), 0, dst + dst_off + i);
    else
        for (; i < count; i++)
            vstore_half_rte(src[src_off + i], dst_off + i, dst);
}
