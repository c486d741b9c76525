/* Matrix products over weights of every storage type (cl/matvec.cl, cl/gemm.cl); the weights
 * are laid out by weights_cl.c, 8-bit activations made by ROUND_Q8 ops (act_q8_cl.c):
 *   - matvec for n <= MATVEC_MAX_N columns (decode), one kernel per kernel path; f32 x over
 *     interleaved weights (CPUs) through matvec_il_n for 1 .. IL_F32_MAX_N columns;
 *   - over 8-bit x, integer dots where the type has them: matvec_q8_il for interleaved weights,
 *     else matvec_q8 for one column, gemm_q8 from GEMM_Q8_MIN_N and, for Q4_K, Q5_K and Q6_K,
 *     stage_kq + gemm_kq from GEMM_KQ_MIN_N;
 *   - GEMM for more columns (prefill) otherwise: on cpu-rows gemm_panels over 16-row panels
 *     (f32 and f16 rows read in place, other types staged to f32 by dequant_rows); on GPUs f32
 *     weights directly, other types staged to f32 in row chunks, for gemm_tiled; CLBlast SGEMM
 *     instead of our kernels where the table says it wins;
 *   - embedding gather through dequant_rows. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fault.h"
#include "matmul_cl.h"
#include "options.h"
#include "program.h"

clinfer_status cl_matmul_init(cl_backend_ctx *b) {
    clinfer_status st = CLINFER_OK;
    cl_int err = CL_SUCCESS;
    b->mm = calloc(1, sizeof *b->mm);
    if (!b->mm) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "OpenCL matmul: state");
    struct cl_matmul_state *s = b->mm;
    bool cpu = cl_cpu_rows(b);
    s->gemm_ts = b->info.max_work_group_size >= 256 ? 16 : 8;
#ifdef CLINFER_WITH_CLBLAST
    /* Tuning table: on CPU OpenCL CLBlast's SGEMM is untuned: 15x slower than gemm_rows (since
     * replaced by gemm_panels, faster still) on PoCL
     * (docs/PERFORMANCE.md); on GPUs its tuned kernels are taken over our plain local-memory
     * gemm_tiled (not measured yet). CPU devices on a GPU path (forced, or a device whose loops
     * are cut short: backend_cl.c's check_loops) keep gemm_tiled too. The clblast option
     * overrides; bench_ops compares both. */
    s->use_clblast = b->options.clblast ? b->options.clblast == CLINFER_ON
                                        : !cpu && b->info.type != CLINFER_DEVICE_CPU;
    if (s->use_clblast) cl_clblast_hold();
#endif
    char options[96];
    snprintf(options, sizeof options, "-DPN=%d -DPT=%d -DPR=%d -DKC=%d -DTS=%zu", GEMM_PN, GEMM_PT,
             GEMM_PR, GEMM_KC, s->gemm_ts);
    CHECK(cl_build(b, "gemm.cl", options, &s->gemm_program));
    if (!cpu) {
        s->gemm = clCreateKernel(s->gemm_program, "gemm_tiled", &err);
        CHECK(cl_error(err, "clCreateKernel(gemm_tiled)"));
    } else {
        const struct {
            cl_kernel *kernel;
            const char *name;
        } panels[] = {{&s->panels, "gemm_panels"}, {&s->panels_f16, "gemm_panels_f16"}};
        for (size_t i = 0; i < sizeof panels / sizeof panels[0]; i++) {
            *panels[i].kernel = clCreateKernel(s->gemm_program, panels[i].name, &err);
            CHECK(cl_error(err, panels[i].name));
        }
    }
    s->bias_fill = clCreateKernel(s->gemm_program, "bias_fill", &err);
    CHECK(cl_error(err, "clCreateKernel(bias_fill)"));
    if (cpu && b->info.type == CLINFER_DEVICE_CPU) { /* see norm_fusable */
        cl_int zero = 0;
        CHECK(cl_create_buffer(b, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero,
                               &s->done));
    }
cleanup:
    return st;
}

int cl_matmul_clblast(const cl_backend_ctx *b) {
    return b->mm && b->mm->use_clblast;
}

void cl_matmul_free(cl_backend_ctx *b) {
    struct cl_matmul_state *s = b->mm;
    if (!s) return;
    if (s->stage.mem) clReleaseMemObject(s->stage.mem);
    if (s->done) clReleaseMemObject(s->done);
    cl_kernel gemm[] = {s->gemm, s->panels, s->panels_f16, s->bias_fill};
    for (size_t i = 0; i < sizeof gemm / sizeof gemm[0]; i++)
        if (gemm[i]) clReleaseKernel(gemm[i]);
    if (s->gemm_program) clReleaseProgram(s->gemm_program);
#ifdef CLINFER_WITH_CLBLAST
    if (s->use_clblast) cl_clblast_drop();
#endif
    free(s);
    b->mm = NULL;
}

/* ---- limits --------------------------------------------------------------------------- */

/* The kernels index x, y, bias and ids with ints: operands must end below INT_MAX. */
static clinfer_status int_indexed(const char *op, const char *name, clinfer_ref ref, size_t count) {
    if (ref.buf && ref.offset + count > INT_MAX)
        return err_fail(CLINFER_ERR_UNSUPPORTED,
                        "OpenCL %s: operand %s ends at element %zu, past int indexing", op, name,
                        ref.offset + count);
    return CLINFER_OK;
}

/* ---- matmul ---------------------------------------------------------------------------- */

static clinfer_status run_matvec(cl_backend_ctx *b, const type_kernels *t, const weight_part *p,
                                 const mm_args *a) {
    cl_mem ws = p->s.mem ? p->s.mem : p->q.mem; /* f32/f16 kernels never read ws */
    int rows = a->rows;
    cl_arg args[] = {
        {sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &ws},       {sizeof(int), &a->il},
        {sizeof(int), &a->k},        {sizeof(int), &a->r0},       {sizeof(int), &rows},
        {sizeof(cl_mem), &a->x},     {sizeof(int), &a->x_off},    {sizeof(int), &a->k},
        {sizeof(cl_mem), &a->y},     {sizeof(int), &a->y_off},    {sizeof(int), &a->ldy},
        {sizeof(cl_mem), &a->bias},  {sizeof(int), &a->bias_off}, {sizeof(int), &a->flags},
        {sizeof(int), &a->n}};
    cl_uint n_args = sizeof args / sizeof args[0] - 1; /* n only for matvec_rows_n */
    cl_kernel kernel = t->matvec;
    size_t wg = t->matvec_rows > 1 ? GPU_MV_WG : b->types->mv_wg; /* matvec_gpu, matvec_wg */
    size_t global[2] = {(size_t)(rows + t->matvec_rows - 1) / t->matvec_rows * wg, (size_t)a->n},
           local[2] = {wg, 1};
    if (cl_cpu_rows(b)) {
        global[0] = cl_round_up((size_t)rows, CPU_LOCAL);
        local[0] = CPU_LOCAL;
        if (a->n > 1) { /* all columns in one pass over W */
            kernel = t->matvec_n;
            n_args++;
            global[1] = 1;
        }
    }
    return cl_launch(b, kernel, "matvec", args, n_args, 2, global, local);
}

/* matvec_il_n: f32 x over interleaved rows, a group of 16 rows and IL_F32_COLS columns per
 * work-item. */
static clinfer_status run_matvec_il(cl_backend_ctx *b, const type_kernels *t, const weight_part *p,
                                    const mm_args *a) {
    int rows = a->rows;
    cl_arg args[] = {
        {sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &p->s.mem}, {sizeof(int), &a->k},
        {sizeof(int), &a->r0},       {sizeof(int), &rows},        {sizeof(cl_mem), &a->x},
        {sizeof(int), &a->x_off},    {sizeof(int), &a->k},        {sizeof(cl_mem), &a->y},
        {sizeof(int), &a->y_off},    {sizeof(int), &a->ldy},      {sizeof(cl_mem), &a->bias},
        {sizeof(int), &a->bias_off}, {sizeof(int), &a->flags},    {sizeof(int), &a->n}};
    size_t global[2] = {(size_t)((a->r0 + rows - 1) / 16 - a->r0 / 16 + 1),
                        (size_t)(a->n + IL_F32_COLS - 1) / IL_F32_COLS},
           local[2] = {1, 1};
    return cl_launch(b, t->matvec_il_n, "matvec_il_n", args, sizeof args / sizeof args[0], 2,
                     global, local);
}

/* Local size (dimension 1) of an integer GEMM launch, whose work-groups walk the column tiles of
 * one row tile. They and the panels put rows in dimension 0, columns in 1: PoCL runs
 * work-groups in order of their ids, dimension 0 first, so neighbouring work-groups move down the
 * rows with the same chunk of x, which stays in L2, and each weight row is read once per chunk
 * rather than x once per row tile (quiet 1B pp512, against columns first: Q6_K +20%, Q4_K_M
 * +10%, F16 +5-15%). */
static size_t col_group(size_t col_tiles) {
    return col_tiles < 16 ? col_tiles : 16;
}

/* GEMM over `rows` f32 weight rows starting at element w_off of w: CLBlast or gemm_tiled. */
static clinfer_status run_gemm(cl_backend_ctx *b, cl_mem w, int w_off, int rows, const mm_args *a) {
    struct cl_matmul_state *s = b->mm;
#ifdef CLINFER_WITH_CLBLAST
    if (s->use_clblast) return cl_clblast_gemm(b, w, w_off, rows, a);
#endif
    cl_arg args[] = {
        {sizeof(cl_mem), &w},        {sizeof(int), &w_off},   {sizeof(int), &a->k},
        {sizeof(int), &rows},        {sizeof(int), &a->n},    {sizeof(cl_mem), &a->x},
        {sizeof(int), &a->x_off},    {sizeof(int), &a->k},    {sizeof(cl_mem), &a->y},
        {sizeof(int), &a->y_off},    {sizeof(int), &a->ldy},  {sizeof(cl_mem), &a->bias},
        {sizeof(int), &a->bias_off}, {sizeof(int), &a->flags}};
    size_t local[2] = {s->gemm_ts, s->gemm_ts};
    size_t global[2] = {cl_round_up((size_t)rows, s->gemm_ts),
                        cl_round_up((size_t)a->n, s->gemm_ts)};
    return cl_launch(b, s->gemm, "gemm", args, sizeof args / sizeof args[0], 2, global, local);
}

/* Rows per chunk of a weight staged for a GEMM: as many whole granules of rows as fit in limit
 * bytes (and the allocation limit) at row_bytes each; at least one granule, at most all rows
 * rounded up to one. */
static int chunk_rows(const cl_backend_ctx *b, uint64_t limit, uint64_t row_bytes, int granule,
                      int rows) {
    uint64_t bytes = cl_alloc_limit(b) < limit ? cl_alloc_limit(b) : limit;
    uint64_t fit = bytes / row_bytes / (uint64_t)granule * (uint64_t)granule;
    int all = (rows + granule - 1) / granule * granule;
    return fit < (uint64_t)granule ? granule : fit < (uint64_t)all ? (int)fit : all;
}

/* gemm_kq: rows [a.r0, a.r0 + a.rows) of part p staged by stage_kq in chunks of whole groups of
 * 16 rows, about KQ_STAGE_BYTES of records each, into the stage scratch. */
static clinfer_status run_gemm_kq(cl_backend_ctx *b, const type_kernels *t, const weight_part *p,
                                  mm_args a) {
    struct cl_matmul_state *s = b->mm;
    clinfer_status st = CLINFER_OK;
    size_t nb = (size_t)a.k / 256, row_bytes = nb * KQ_REC_BYTES / 16;
    int chunk = chunk_rows(b, KQ_STAGE_BYTES, row_bytes, 16, a.rows);
    CHECK(cl_ensure_scratch(b, &s->stage, (size_t)chunk * row_bytes));
    int part_y = a.y_off, part_bias = a.bias_off;
    cl_mem xo = cl_q8_xo(a.xq);
    for (int r = 0; r < a.rows; r += chunk) {
        int count = a.rows - r < chunk ? a.rows - r : chunk, first = a.r0 + r;
        cl_mem ws = p->s.mem;
        cl_arg stage[] = {{sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &ws},
                          {sizeof(int), &a.k},         {sizeof(int), &first},
                          {sizeof(int), &count},       {sizeof(cl_mem), &s->stage.mem}};
        size_t sglobal[2] = {nb, ((size_t)count + 15) / 16};
        CHECK(cl_launch(b, t->stage_kq, "stage_kq", stage, 6, 2, sglobal, NULL));
        a.y_off = part_y + r;
        a.bias_off = part_bias + r;
        cl_arg args[] = {{sizeof(cl_mem), &s->stage.mem},
                         {sizeof(int), &a.k},
                         {sizeof(int), &count},
                         {sizeof(cl_mem), &a.xq->q.mem},
                         {sizeof(cl_mem), &a.xq->d.mem},
                         {sizeof(cl_mem), &xo},
                         {sizeof(cl_mem), &a.y},
                         {sizeof(int), &a.y_off},
                         {sizeof(int), &a.ldy},
                         {sizeof(cl_mem), &a.bias},
                         {sizeof(int), &a.bias_off},
                         {sizeof(int), &a.flags},
                         {sizeof(int), &a.n}};
        /* a work-item per KQ_RECS groups of 16 rows and IL_COLS columns, rows first (col_group) */
        size_t col_items = ((size_t)a.n + IL_COLS - 1) / IL_COLS;
        size_t local[2] = {1, col_group(col_items)};
        size_t global[2] = {((size_t)count + 16 * KQ_RECS - 1) / (16 * KQ_RECS),
                            cl_round_up(col_items, local[1])};
        CHECK(cl_launch(b, t->gemm_kq, "gemm_kq", args, sizeof args / sizeof args[0], 2, global,
                        local));
    }
cleanup:
    return st;
}

static clinfer_status run_matvec_q8(cl_backend_ctx *b, const type_kernels *t, const weight_part *p,
                                    const mm_args *a) {
    int rows = a->rows;
    cl_mem ws = p->s.mem;
    cl_mem xo = cl_q8_xo(a->xq);
    cl_arg args[] = {{sizeof(cl_mem), &p->q.mem},
                     {sizeof(cl_mem), &ws},
                     {sizeof(int), &a->k},
                     {sizeof(int), &a->r0},
                     {sizeof(int), &rows},
                     {sizeof(cl_mem), &a->xq->q.mem},
                     {sizeof(cl_mem), &a->xq->d.mem},
                     {sizeof(cl_mem), &a->y},
                     {sizeof(int), &a->y_off},
                     {sizeof(int), &a->ldy},
                     {sizeof(cl_mem), &a->bias},
                     {sizeof(int), &a->bias_off},
                     {sizeof(int), &a->flags},
                     {sizeof(cl_mem), &xo},
                     {sizeof(int), &a->n}};
    /* the arguments all three kernels take; then xo for matvec_q8 and gemm_q8, n for gemm_q8
     * and matvec_q8_il */
    cl_uint n_args = sizeof args / sizeof args[0] - 2;
    if (!a->il && a->n >= GEMM_Q8_MIN_N) { /* GEMM_Q8_M rows x GEMM_Q8_N columns per work-item */
        size_t col_tiles = ((size_t)a->n + GEMM_Q8_N - 1) / GEMM_Q8_N;
        size_t local[2] = {1, col_group(col_tiles)};
        size_t global[2] = {((size_t)rows + GEMM_Q8_M - 1) / GEMM_Q8_M,
                            cl_round_up(col_tiles, local[1])};
        return cl_launch(b, t->gemm_q8, "gemm_q8", args, n_args + 2, 2, global, local);
    }
    if (!a->il) { /* one work-item per (row, column) */
        size_t global[2] = {cl_round_up((size_t)rows, CPU_LOCAL), (size_t)a->n};
        size_t local[2] = {CPU_LOCAL, 1};
        return cl_launch(b, t->matvec_q8, "matvec_q8", args, n_args + 1, 2, global, local);
    }
    /* a work-item per group of 16 rows that holds some of them and IL_COLS columns; a
     * work-group walks columns over the same rows (col_group: rows first) */
    size_t col_items = ((size_t)a->n + IL_COLS - 1) / IL_COLS;
    size_t local[2] = {1, col_group(col_items)};
    size_t global[2] = {(size_t)((a->r0 + rows - 1) / 16 - a->r0 / 16 + 1),
                        cl_round_up(col_items, local[1])};
    args[n_args] = args[n_args + 1]; /* n, without xo */
    return cl_launch(b, t->matvec_q8_il, "matvec_q8_il", args, n_args + 1, 2, global, local);
}

/* The fused RMSNORM's operands (an absent weight binds y, never read). */
typedef struct {
    cl_mem w, y;
    cl_ulong w_off, y_off;
    int has_w;
} norm_operands;

static norm_operands norm_of(const mm_args *a) {
    const clinfer_op *no = a->norm;
    return (norm_operands){no->norm.w.buf ? no->norm.w.buf->mem : a->y, no->norm.y.buf->mem,
                           no->norm.w.offset, no->norm.y.offset, no->norm.w.buf != NULL};
}

/* The arguments the *_norm kernels take after the matmul's: done, nw, nw_off, has_nw, ny,
 * ny_off, eps (pointing into o and a). */
static void norm_args(const cl_backend_ctx *b, const norm_operands *o, const mm_args *a,
                      cl_arg out[7]) {
    cl_arg args[] = {
        {sizeof(cl_mem), &b->mm->done},     {sizeof(cl_mem), &o->w}, {sizeof(cl_ulong), &o->w_off},
        {sizeof(int), &o->has_w},           {sizeof(cl_mem), &o->y}, {sizeof(cl_ulong), &o->y_off},
        {sizeof(float), &a->norm->norm.eps}};
    memcpy(out, args, sizeof args);
}

/* matvec_rows_norm: the matmul of a (all rows of a one-part weight, one column of f32 x), then
 * the RMSNORM a->norm of its output. */
static clinfer_status run_matvec_norm(cl_backend_ctx *b, const type_kernels *t,
                                      const weight_part *p, const mm_args *a) {
    cl_mem ws = p->s.mem ? p->s.mem : p->q.mem; /* f32/f16 kernels never read ws */
    norm_operands o = norm_of(a);
    int rows = a->rows;
    cl_arg args[19] = {
        {sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &ws},       {sizeof(int), &a->il},
        {sizeof(int), &a->k},        {sizeof(int), &rows},        {sizeof(cl_mem), &a->x},
        {sizeof(int), &a->x_off},    {sizeof(cl_mem), &a->y},     {sizeof(int), &a->y_off},
        {sizeof(cl_mem), &a->bias},  {sizeof(int), &a->bias_off}, {sizeof(int), &a->flags}};
    norm_args(b, &o, a, args + 12);
    size_t global[2] = {(size_t)(rows + NORM_ROWS - 1) / NORM_ROWS, 1}, local[2] = {1, 1};
    return cl_launch(b, t->matvec_norm, "matvec_rows_norm", args, 19, 2, global, local);
}

/* matvec_q8_il_norm: the matmul of a (all rows of a one-part weight, one column), then a->norm,
 * rounding its output for the ROUND_Q8 a->round where there is one. */
static clinfer_status run_matvec_q8_norm(cl_backend_ctx *b, const type_kernels *t,
                                         const weight_part *p, const mm_args *a) {
    clinfer_status st = CLINFER_OK;
    norm_operands o = norm_of(a);
    int rows = a->rows, want_q = a->round != NULL;
    cl_q8_out out = {.q = o.y, .d = o.y, .f = o.y}; /* unwritten without want_q */
    if (want_q) CHECK(cl_q8_out_begin(b, a->round, &out));
    cl_arg args[23] = {{sizeof(cl_mem), &p->q.mem},
                       {sizeof(cl_mem), &p->s.mem},
                       {sizeof(int), &a->k},
                       {sizeof(int), &rows},
                       {sizeof(cl_mem), &a->xq->q.mem},
                       {sizeof(cl_mem), &a->xq->d.mem},
                       {sizeof(cl_mem), &a->y},
                       {sizeof(int), &a->y_off},
                       {sizeof(cl_mem), &a->bias},
                       {sizeof(int), &a->bias_off},
                       {sizeof(int), &a->flags}};
    norm_args(b, &o, a, args + 11);
    args[18] = CL_ARG(want_q);
    args[19] = CL_ARG(out.q);
    args[20] = CL_ARG(out.d);
    args[21] = CL_ARG(out.f);
    args[22] = CL_ARG(out.want_f);
    size_t global[2] = {(size_t)(rows + 15) / 16, 1}, local[2] = {1, 1};
    CHECK(cl_launch(b, t->matvec_q8_il_norm, "matvec_q8_il_norm", args, 23, 2, global, local));
    if (want_q) CHECK(cl_q8_out_end(b, &out));
cleanup:
    return st;
}

/* Dequantizes rows [first, first + count) of part p (weight-global numbering) into out. */
static clinfer_status run_dequant(cl_backend_ctx *b, const struct cl_weight *w,
                                  const weight_part *p, cl_mem ids, int ids_off, int has_ids,
                                  int first, int count, cl_mem out, int out_off) {
    const type_kernels *t = &b->types->types[w->layout.type];
    cl_mem ws = p->s.mem ? p->s.mem : p->q.mem;
    cl_mem ids_arg = has_ids ? ids : out; /* never read without has_ids */
    /* one item per kernel block; for f32/f16 one more per row writes the tail */
    size_t nb = (size_t)w->k / w->layout.kblk + ((size_t)w->k % w->layout.kblk != 0);
    size_t global[2] = {nb, (size_t)count};
    cl_arg args[] = {
        {sizeof(cl_mem), &p->q.mem}, {sizeof(cl_mem), &ws},      {sizeof(int), &w->il},
        {sizeof(int), &w->k},        {sizeof(int), &p->row0},    {sizeof(int), &p->rows},
        {sizeof(int), &w->m},        {sizeof(cl_mem), &ids_arg}, {sizeof(int), &ids_off},
        {sizeof(int), &has_ids},     {sizeof(int), &first},      {sizeof(cl_mem), &out},
        {sizeof(int), &out_off}};
    return cl_launch(b, t->dequant, "dequant_rows", args, sizeof args / sizeof args[0], 2, global,
                     NULL);
}

/* Whether f32 x (or d * q of 8-bit x) goes through matvec_il_n. */
static int il_f32_for(const struct cl_weight *w, const type_kernels *t, int n) {
    return w->il && t->matvec_il_n && n <= IL_F32_MAX_N;
}

/* GEMM on cpu-rows devices (without CLBlast): gemm_panels over rows [lo, lo + a.rows) of part p,
 * f32 and f16 rows where they are, other types staged to f32 rows first, in chunks of about
 * STAGE_BYTES. */
static clinfer_status run_panels(cl_backend_ctx *b, const struct cl_weight *w, const weight_part *p,
                                 int lo, mm_args a) {
    struct cl_matmul_state *s = b->mm;
    clinfer_status st = CLINFER_OK;
    clinfer_dtype type = w->layout.type;
    int f16 = type == CLINFER_DT_F16, staged = !f16 && type != CLINFER_DT_F32, k = a.k;
    int chunk =
        staged ? chunk_rows(b, STAGE_BYTES, (uint64_t)k * sizeof(float), GEMM_PM, a.rows) : a.rows;
    if (staged) CHECK(cl_ensure_scratch(b, &s->stage, (size_t)chunk * k * sizeof(float)));
    int part_y = a.y_off, part_bias = a.bias_off;
    for (int r = 0; r < a.rows; r += chunk) {
        /* w_off < m * k, which weight_create keeps within int */
        int count = a.rows - r < chunk ? a.rows - r : chunk, w_off = (a.r0 + r) * k;
        cl_mem src = p->q.mem;
        if (staged) {
            CHECK(run_dequant(b, w, p, NULL, 0, 0, lo + r, count, s->stage.mem, 0));
            src = s->stage.mem;
            w_off = 0;
        }
        a.y_off = part_y + r;
        a.bias_off = part_bias + r;
        cl_arg args[] = {
            {sizeof(cl_mem), &src},     {sizeof(int), &w_off},  {sizeof(int), &k},
            {sizeof(int), &count},      {sizeof(int), &a.n},    {sizeof(cl_mem), &a.x},
            {sizeof(int), &a.x_off},    {sizeof(int), &a.k},    {sizeof(cl_mem), &a.y},
            {sizeof(int), &a.y_off},    {sizeof(int), &a.ldy},  {sizeof(cl_mem), &a.bias},
            {sizeof(int), &a.bias_off}, {sizeof(int), &a.flags}};
        /* a work-item takes GEMM_PR panels and PN * PT columns, rows first */
        size_t panels = ((size_t)count + GEMM_PM - 1) / GEMM_PM;
        size_t items = ((size_t)a.n + GEMM_PN * GEMM_PT - 1) / (GEMM_PN * GEMM_PT);
        size_t local[2] = {1, 1};
        size_t global[2] = {(panels + GEMM_PR - 1) / GEMM_PR, items};
        CHECK(cl_launch(b, f16 ? s->panels_f16 : s->panels, "gemm_panels", args,
                        sizeof args / sizeof args[0], 2, global, local));
    }
cleanup:
    return st;
}

/* Whether the matmul op's kernel can run `norm`, an RMSNORM (already checked) of its output, at
 * its end: one launch of one column over all rows of a one-part weight, through
 * matvec_q8_il_norm (8-bit x) or matvec_rows_norm (f32 x). */
static bool norm_fusable(const cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm) {
    const clinfer_buffer *wb = op->matmul.w;
    if (norm->kind != CLINFER_OP_RMSNORM || op->matmul.n != 1 || !wb || !wb->weight) return false;
    const struct cl_weight *w = wb->weight;
    const type_kernels *t = &b->types->types[w->layout.type];
    /* matvec_il_n takes no norm, and beats matvec_rows_norm with a norm launch of its own
     * (SmolLM2 Q4_1 decode 60 -> 78 tokens/s, docs/PERFORMANCE.md) */
    bool kernel = op->matmul.x_q8 ? w->il && t->matvec_q8_il_norm
                                  : t->matvec_norm != NULL && !il_f32_for(w, t, 1);
    /* done, the kernels' counter, exists on CPU devices only: the last work-item seeing the
     * others' rows rests on their coherent memory (the kernel path can be forced on a GPU) */
    return kernel && b->mm->done && w->n_parts == 1 && op->matmul.row0 == 0 && norm->norm.n == 1 &&
           norm->norm.d == op->matmul.m && norm->norm.d % CLINFER_Q8_ACT_BLOCK == 0 &&
           norm->norm.x.buf == op->matmul.y.buf && norm->norm.x.offset == op->matmul.y.offset;
}

static clinfer_status matmul(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm,
                             const clinfer_op *round);

clinfer_status cl_matmul(cl_backend_ctx *b, const clinfer_op *op) {
    return matmul(b, op, NULL, NULL);
}

clinfer_status cl_matmul_norm(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm,
                              const clinfer_op *round, size_t *taken) {
    *taken = 0;
    if (!norm_fusable(b, op, norm)) return CLINFER_OK;
    /* matvec_q8_il_norm rounds per 32, into a buffer other than the one its x lies in */
    if (!round || !op->matmul.x_q8 || round->round_q8.y.buf == op->matmul.x.buf ||
        !cl_rounds(round, norm->norm.y, (size_t)norm->norm.d, 1))
        round = NULL;
    *taken = round ? 3 : 2;
    clinfer_status st = matmul(b, op, norm, round);
    if (st != CLINFER_OK) *taken = 0;
    return st;
}

clinfer_status cl_matmul_limits(const clinfer_op *op) {
    clinfer_status st = CLINFER_OK;
    if (op->kind == CLINFER_OP_MATMUL) {
        size_t m = (size_t)op->matmul.m, k = (size_t)op->matmul.k, n = (size_t)op->matmul.n;
        CHECK(int_indexed("matmul", "x", op->matmul.x, n * k));
        CHECK(int_indexed("matmul", "y", op->matmul.y, n * m));
        CHECK(int_indexed("matmul", "bias", op->matmul.bias, m));
    } else if (op->kind == CLINFER_OP_EMBED) {
        CHECK(int_indexed("embed", "ids", op->embed.ids, (size_t)op->embed.n));
        CHECK(int_indexed("embed", "y", op->embed.y, (size_t)op->embed.n * (size_t)op->embed.k));
    }
cleanup:
    return st;
}

/* Whether a matmul over 8-bit x runs an integer kernel (else f32 kernels read x as d * q). */
static int q8_kernel_for(const struct cl_weight *w, const type_kernels *t, int n) {
    /* matvec_q8_il takes any n: IL_COLS columns per work-item make it a GEMM */
    if (w->il) return t->matvec_q8_il != NULL;
    return (n < GEMM_Q8_MIN_N ? t->matvec_q8 : t->gemm_q8) != NULL;
}

/* The matmul op, with norm (norm_fusable) run by its launch's last work-item, rounding its output
 * for round (NULL: none). */
static clinfer_status matmul(cl_backend_ctx *b, const clinfer_op *op, const clinfer_op *norm,
                             const clinfer_op *round) {
    clinfer_status st = CLINFER_OK;
    int m = op->matmul.m, k = op->matmul.k, n = op->matmul.n;
    int row0 = op->matmul.row0;
    CHECK(cl_matmul_limits(op));
    int has_bias = op->matmul.bias.buf != NULL;
    const struct cl_weight *w = op->matmul.w->weight;
    const clinfer_block_split *l = &w->layout;
    const type_kernels *t = &b->types->types[l->type];
    int q8_kernel = 0, kq = 0; /* kq: stage_kq + gemm_kq */
    const cl_q8_side *xq = NULL;
    if (op->matmul.x_q8) { /* f32 kernels read x as it is: d * q */
        CHECK(cl_q8_x(op, &xq));
        q8_kernel = q8_kernel_for(w, t, n);
        kq = q8_kernel && !w->il && n >= GEMM_KQ_MIN_N && t->gemm_kq;
    }
    mm_args a = {
        .x = op->matmul.x.buf->mem,
        .y = op->matmul.y.buf->mem,
        .bias = has_bias ? op->matmul.bias.buf->mem : op->matmul.y.buf->mem,
        .x_off = (int)op->matmul.x.offset,
        .k = k,
        .n = n,
        .ldy = m,
        .flags = (op->matmul.accumulate ? F_ACCUMULATE : 0) | (has_bias ? F_BIAS : 0),
        .il = w->il,
        .norm = norm,
        .round = round,
        .xq = xq,
    };
    for (int i = 0; i < w->n_parts; i++) {
        const weight_part *p = &w->parts[i];
        /* the op's rows this part holds: [lo, hi) in the weight's numbering */
        int lo = p->row0 > row0 ? p->row0 : row0;
        int hi = p->row0 + p->rows < row0 + m ? p->row0 + p->rows : row0 + m;
        if (lo >= hi) continue;
        a.r0 = lo - p->row0;
        a.rows = hi - lo;
        a.y_off = (int)op->matmul.y.offset + (lo - row0);
        a.bias_off = (has_bias ? (int)op->matmul.bias.offset : 0) + (lo - row0);
        if (norm) {
            CHECK(q8_kernel ? run_matvec_q8_norm(b, t, p, &a) : run_matvec_norm(b, t, p, &a));
        } else if (kq) {
            CHECK(run_gemm_kq(b, t, p, a));
        } else if (q8_kernel) {
            CHECK(run_matvec_q8(b, t, p, &a));
        } else if (il_f32_for(w, t, n)) {
            CHECK(run_matvec_il(b, t, p, &a));
        } else if (n <= MATVEC_MAX_N) {
            CHECK(run_matvec(b, t, p, &a));
        } else if (cl_cpu_rows(b) && !b->mm->use_clblast) {
            CHECK(run_panels(b, w, p, lo, a));
        } else if (l->type == CLINFER_DT_F32) {
            CHECK(run_gemm(b, p->q.mem, a.r0 * k, a.rows, &a));
        } else {
            int chunk = chunk_rows(b, STAGE_BYTES, (uint64_t)k * sizeof(float), 1, a.rows);
            CHECK(cl_ensure_scratch(b, &b->mm->stage, (size_t)chunk * k * sizeof(float)));
            int part_y = a.y_off, part_bias = a.bias_off;
            for (int r = 0; r < a.rows; r += chunk) {
                int count = a.rows - r < chunk ? a.rows - r : chunk;
                CHECK(run_dequant(b, w, p, NULL, 0, 0, lo + r, count, b->mm->stage.mem, 0));
                a.y_off = part_y + r;
                a.bias_off = part_bias + r;
                CHECK(run_gemm(b, b->mm->stage.mem, 0, count, &a));
            }
        }
    }
cleanup:
    return st;
}

clinfer_status cl_embed(cl_backend_ctx *b, const clinfer_op *op) {
    clinfer_status st = CLINFER_OK;
    int n = op->embed.n;
    CHECK(cl_matmul_limits(op));
    const struct cl_weight *w = op->embed.w->weight;
    /* Every part looks at every id and writes the rows it holds; ids outside [0, m) give zero
     * rows (written by the first part) instead of reading out of bounds. */
    for (int i = 0; i < w->n_parts; i++)
        CHECK(run_dequant(b, w, &w->parts[i], op->embed.ids.buf->mem, (int)op->embed.ids.offset, 1,
                          0, n, op->embed.y.buf->mem, (int)op->embed.y.offset));
cleanup:
    return st;
}

clinfer_status cl_weight_view_of(cl_backend_ctx *b, const clinfer_op *op, cl_weight_view *v) {
    bool matmul = op->kind == CLINFER_OP_MATMUL;
    clinfer_status st = cl_matmul_limits(op);
    if (st != CLINFER_OK) return st;
    const struct cl_weight *w = (matmul ? op->matmul.w : op->embed.w)->weight;
    const weight_part *p = &w->parts[0];
    const weight_array *q = &p->q, *sc = p->s.mem ? &p->s : &p->q; /* f32/f16: no scales */
    const type_kernels *t = &b->types->types[w->layout.type];
    int q8 = matmul && op->matmul.x_q8 && q8_kernel_for(w, t, op->matmul.n);
    int il_f32 = matmul && il_f32_for(w, t, op->matmul.n);
    *v = (cl_weight_view){.type = w->layout.type,
                          .parts = w->n_parts,
                          .q = q->arena ? q->arena->mem : q->mem,
                          .q_off = q->offset,
                          .s = sc->arena ? sc->arena->mem : sc->mem,
                          .s_off = sc->offset,
                          .il = w->il,
                          .variant = q8       ? (w->il ? CL_MM_IL : CL_MM_Q8)
                                     : il_f32 ? CL_MM_IL_F32
                                              : CL_MM_ROWS,
                          .row_bytes = cl_stored_row_bytes(&w->layout, w->il, w->k)};
    return CLINFER_OK;
}
