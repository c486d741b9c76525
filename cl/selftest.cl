/* selftest.cl: the smallest useful program, for tests of the build path and the cache.
 *   vector_add  c[i] = a[i] + b[i] for i < n (global size may round n up)
 * Assumes nothing beyond OpenCL C 1.2. */
__kernel void vector_add(__global const float *a, __global const float *b, __global float *c,
                         const uint n) {
    const size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
