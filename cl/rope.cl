/* Rotary position embedding, in place on x[n][n_heads][head_dim]. One work-item per (token,
 * pair) computes the angle once and turns that pair in every head (1D global size
 * n * n_rot/2, rounded up to the local size: few work-groups, as PoCL wants). Token t sits at
 * position pos0 + t; pair j turns by
 *   theta = pos * freq_scale * freq_base^(-2j / n_rot).
 * Normal pairing rotates (2j, 2j+1) (llama/GPT-J); NeoX pairing rotates (j, j + n_rot/2).
 * Dimensions from n_rot to head_dim stay as they are. */

__kernel void rope(__global float *x, ulong x_off, int n, int n_heads, int head_dim, int n_rot,
                   int pos0, float freq_base, float freq_scale, int neox) {
    int half_rot = n_rot / 2;
    size_t id = get_global_id(0);
    if (id >= (size_t)n * half_rot) return;
    int t = id / half_rot, j = id % half_rot;
    float theta = (float)(pos0 + t) * freq_scale * pow(freq_base, -2.0f * j / n_rot);
    float c, s = sincos(theta, &c);
    int i0 = neox ? j : 2 * j;
    int i1 = neox ? j + half_rot : 2 * j + 1;
    __global float *row = x + x_off + (size_t)t * n_heads * head_dim;
    for (int h = 0; h < n_heads; h++, row += head_dim) {
        float x0 = row[i0], x1 = row[i1];
        row[i0] = x0 * c - x1 * s;
        row[i1] = x0 * s + x1 * c;
    }
}
