/* clinfer_verify (clinfer.h): the same tokens through a device and the reference backend, op by op,
 * comparing every region each op writes. Both sides build the same plan from the same model, so
 * step i is the same op on each. After each comparison the device's regions get the reference's
 * values: with 8-bit activations a last-bit difference grows from layer to layer (see the
 * tolerances), which would hide a kernel's own error behind its inputs'; the whole evaluation at
 * the end shows that growth. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "error.h"
#include "split_plan.h"
#include "verify.h"

/* The tolerance table: by whether the matmuls round activations to 8 bits (whatever their weight
 * type), the NMSE each op's row may reach (the op alone, fed the reference's state) and the whole
 * evaluation's logits (every op's difference carried on); a walk takes the loosest entry among
 * its matmuls. A broken kernel gives NMSE ~1 or NaN. Measured on PoCL (cpu-rows, gpu-local-reduce,
 * and gpu-subgroup while it was offered; the tiny test models of every type, SmolLM2-135M Q4_1 at
 * 16 to 256 tokens): op rows    <= 1.5e-9 for every type and activation format: f32 sums in another
 * order, and a rotated key rounding to the other f16 neighbour in the cache (measured 1e-9);
 *              round_q8 rows 0 (the same inputs round the same; SmolLM2 Q4_1 and Gemma 3 270M
 *              Q4_K_M, cpu-rows and gpu-local-reduce, 12 tokens); bound
 *              1e-6, and 1e-5 with 8-bit activations, where a device whose division rounds
 *              otherwise may move a value across a rounding boundary (~1e-6 a step, as
 *              tests/test_cl_ops.c allows)
 *   whole      f32 activations <= 1.2e-7 (SmolLM2, 128 tokens): bound 1e-5. 8-bit activations
 *              <= 1.8e-3 (SmolLM2, 64 tokens): a last-bit difference moves a value across a
 *              rounding boundary, the step moves the next layer's inputs by a whole step of their
 *              block, and so on: the difference grows to the size of 8-bit rounding itself, with
 *              the same most likely token; bound 3e-2
 * Every weight type takes its activation format's bounds: none measured apart from the others
 * (a table by type once left those it did not list, Q5_0 on, with a bound of 0). */
static const struct {
    bool x_q8;
    double op, whole;
} tolerances[] = {{false, 1e-6, 1e-5}, {true, 1e-5, 3e-2}};

enum { DEV, REF, SIDES };

typedef struct {
    clinfer_model *model[SIDES];
    clinfer_context *ctx[SIDES];
    void *raw[SIDES];   /* one output of each side as read */
    float *host[SIDES]; /* and as f32 */
    size_t cap;         /* elements of each */
    clinfer_verify_report *report;
    size_t rows_cap;
} verifier;

/* Sets the report's tolerance from the matmuls of a plan. */
static void choose_tolerance(verifier *v, const split_plan *plan) {
    clinfer_verify_report *r = v->report;
    for (size_t g = 0; g < plan->n_seg; g++)
        for (size_t i = 0; i < exec_plan_len(plan->seg[g].plan, true); i++) {
            exec_step s = exec_plan_at(plan->seg[g].plan, i, 0);
            if (s.op.kind != CLINFER_OP_MATMUL) continue;
            for (size_t t = 0; t < sizeof tolerances / sizeof tolerances[0]; t++)
                if (tolerances[t].x_q8 == s.op.matmul.x_q8 &&
                    tolerances[t].op + tolerances[t].whole > r->bound + r->bound_whole) {
                    r->bound = tolerances[t].op;
                    r->bound_whole = tolerances[t].whole;
                    snprintf(r->tolerance, sizeof r->tolerance, "%s weights, %s activations",
                             dtype_name(s.w_type), s.op.matmul.x_q8 ? "8-bit" : "f32");
                }
        }
}

static size_t elem_bytes(const clinfer_op_output *o) {
    return o->type == CLINFER_DT_F16 ? sizeof(uint16_t) : sizeof(float);
}

/* Reads one output of one side into v->raw[side] and, as f32, v->host[side]. */
static clinfer_status read_output(verifier *v, int side, const clinfer_op_output *o,
                                  const clinfer_backend *be) {
    clinfer_status st = CLINFER_OK;
    if (o->count > v->cap) {
        v->cap = o->count;
        for (int s = 0; s < SIDES; s++) {
            free(v->raw[s]);
            free(v->host[s]);
            v->raw[s] = malloc(o->count * sizeof(float));
            v->host[s] = malloc(o->count * sizeof(float));
            if (!v->raw[s] || !v->host[s]) v->cap = 0;
        }
        if (!v->cap) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "verify: %zu elements", o->count);
    }
    size_t elem = elem_bytes(o);
    CHECK(be->i->buffer_read(be->ctx, o->ref.buf, o->ref.offset * elem, o->count * elem,
                             v->raw[side]));
    const uint16_t *half = v->raw[side];
    for (size_t i = 0; i < o->count; i++)
        v->host[side][i] =
            elem == sizeof(float) ? ((const float *)v->raw[side])[i] : f16_to_f32(half[i]);
cleanup:
    return st;
}

/* Appends row; op_row: one op's, which may be the worst (the whole evaluation's is not). */
static clinfer_status add_row(verifier *v, const clinfer_verify_row *row, bool op_row) {
    clinfer_verify_report *r = v->report;
    if (r->n_rows == v->rows_cap) {
        size_t cap = v->rows_cap ? 2 * v->rows_cap : 256;
        clinfer_verify_row *grown = realloc(r->rows, cap * sizeof *grown);
        if (!grown) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "verify: %zu rows", cap);
        r->rows = grown;
        v->rows_cap = cap;
    }
    size_t i = r->n_rows++;
    r->rows[i] = *row;
    if (!row->ok && r->n_failed++ == 0) r->first_failed = i;
    double worst = r->rows[r->worst].nmse; /* a NaN row is the worst there is */
    if (op_row && !isnan(worst) && (isnan(row->nmse) || row->nmse > worst)) r->worst = i;
    return CLINFER_OK;
}

/* Fills row's errors of dev against ref; *at receives the index of the worst element. */
static void measure(const float *dev, const float *ref, size_t count, clinfer_verify_row *row,
                    size_t *at) {
    double num = 0, den = 0, worst = -1;
    *at = 0;
    for (size_t e = 0; e < count; e++) {
        double d = (double)dev[e] - ref[e], r = ref[e];
        num += d * d;
        den += r * r;
        if (!(fabs(d) <= worst)) { /* NaN counts as the largest */
            worst = isnan(d) ? INFINITY : fabs(d);
            *at = e;
        }
    }
    row->nmse = den > 0 ? num / den : num;
    row->max_abs = count ? worst : 0;
    row->ok = row->nmse <= row->bound;
}

/* One op of a walk on one side: step i of plan, on be over state. */
typedef struct {
    const exec_plan *plan;
    size_t i;
    const clinfer_backend *be;
    const exec_state *state;
} side_step;

/* Compares every region the step's op wrote on both sides, one row each, then gives the device the
 * reference's values, so that the next op starts from the same state on both and each row
 * measures one op. */
static clinfer_status compare_step(verifier *v, const side_step t[SIDES], int pos0, int n,
                                   const char *phase) {
    clinfer_status st = CLINFER_OK;
    exec_step s[SIDES];
    clinfer_op_output out[SIDES][CLINFER_OP_MAX_OUTPUTS];
    size_t n_out = 0, at;
    for (int side = 0; side < SIDES; side++) {
        s[side] = exec_plan_at(t[side].plan, t[side].i, pos0);
        n_out = op_outputs(&s[side].op, out[side]);
    }
    clinfer_verify_row row = {.phase = phase, .layer = s[DEV].layer, .bound = v->report->bound};
    verify_label(v->model[DEV], t[DEV].state, &s[DEV], row.op, sizeof row.op);
    for (size_t k = 0; k < n_out; k++) {
        const clinfer_op_output *o = &out[DEV][k];
        for (int side = 0; side < SIDES; side++)
            CHECK(read_output(v, side, &out[side][k], t[side].be));
        measure(v->host[DEV], v->host[REF], o->count, &row, &at);
        size_t row_len = o->count / (size_t)(o->tokens ? o->tokens : n);
        row.output = o->name;
        row.worst_pos = (uint32_t)(pos0 + s[DEV].first_row + (int)(at / row_len));
        CHECK(add_row(v, &row, true));
        size_t elem = elem_bytes(o);
        CHECK(t[DEV].be->i->buffer_write(t[DEV].be->ctx, o->ref.buf, o->ref.offset * elem,
                                         o->count * elem, v->raw[REF]));
    }
cleanup:
    return st;
}

/* Evaluates n tokens on both sides, op by op, comparing after each: the reference's one plan
 * beside the device's segments (one per device of a split model), the hidden state crossing
 * to each next device as a walk's does. */
static clinfer_status walk(verifier *v, const int32_t *tokens, size_t n, const char *phase) {
    clinfer_status st = CLINFER_OK;
    context_batch b[SIDES];
    for (int side = 0; side < SIDES; side++)
        CHECK(context_stage(v->ctx[side], tokens, n, &b[side]));
    if (!v->report->tolerance[0]) choose_tolerance(v, b[DEV].plan);
    const split_segment *ref = &b[REF].plan->seg[0];
    side_step t[SIDES] = {
        {0}, {ref->plan, 0, context_backend(v->ctx[REF], 0), context_state(v->ctx[REF], 0)}};
    for (size_t g = 0; g < b[DEV].plan->n_seg; g++) {
        const split_segment *seg = &b[DEV].plan->seg[g];
        if (g) CHECK(split_plan_cross(v->ctx[DEV], b[DEV].plan, g));
        t[DEV] = (side_step){seg->plan, 0, context_backend(v->ctx[DEV], seg->dev),
                             context_state(v->ctx[DEV], seg->dev)};
        for (; t[DEV].i < exec_plan_len(seg->plan, true); t[DEV].i++, t[REF].i++) {
            for (int side = 0; side < SIDES; side++)
                CHECK(exec_plan_step(t[side].be, t[side].plan, t[side].i, b[side].pos0));
            CHECK(compare_step(v, t, b[DEV].pos0, (int)n, phase));
        }
    }
    for (int side = 0; side < SIDES; side++)
        context_advance(v->ctx[side], n);
cleanup:
    if (st != CLINFER_OK) err_prefix("verify: %s of %zu tokens", phase, n);
    return st;
}

/* The tokens evaluated again as clinfer_eval runs them (the device's runs of ops in one launch
 * included), each side on its own: the logits show how far the device drifts over the whole
 * model, the ops' differences added up. */
static clinfer_status whole(verifier *v, const int32_t *tokens, size_t n) {
    clinfer_status st = CLINFER_OK;
    const float *logits[SIDES];
    size_t n_vocab = 0, at;
    clinfer_sampler *sampler = NULL;
    for (int side = 0; side < SIDES; side++) {
        clinfer_context_reset(v->ctx[side]);
        if (n > 1) CHECK(clinfer_eval(v->ctx[side], tokens, n - 1));
        CHECK(clinfer_eval(v->ctx[side], tokens + n - 1, 1));
        CHECK(clinfer_get_logits(v->ctx[side], &logits[side], &n_vocab));
    }
    clinfer_verify_row row = {.phase = "whole",
                              .layer = (int32_t)v->report->n_layer,
                              .output = "logits",
                              .worst_pos = (uint32_t)n - 1,
                              .bound = v->report->bound_whole};
    snprintf(row.op, sizeof row.op, "eval (fused launches)");
    measure(logits[DEV], logits[REF], n_vocab, &row, &at);
    CHECK(add_row(v, &row, false));
    clinfer_sampler_params greedy;
    clinfer_sampler_params_default(&greedy);
    greedy.temperature = 0;
    CHECK(clinfer_sampler_create(&greedy, &sampler));
    CHECK(clinfer_sampler_sample(sampler, logits[DEV], n_vocab, &v->report->top_device));
    CHECK(clinfer_sampler_sample(sampler, logits[REF], n_vocab, &v->report->top_reference));
cleanup:
    clinfer_sampler_free(sampler);
    if (st != CLINFER_OK) err_prefix("verify: the whole evaluation");
    return st;
}

static clinfer_status open_sides(verifier *v, const char *path, const clinfer_model_params *dev,
                                 const clinfer_context_params *cp, size_t n_tokens) {
    clinfer_status st = CLINFER_OK;
    clinfer_model_params params[SIDES];
    if (dev)
        params[DEV] = *dev;
    else
        clinfer_model_params_default(&params[DEV]);
    clinfer_model_params_default(&params[REF]);
    params[REF].backend = CLINFER_BACKEND_REFERENCE;
    params[REF].verbose = params[DEV].verbose;
    clinfer_context_params c;
    if (cp)
        c = *cp;
    else
        clinfer_context_params_default(&c);
    if (!c.n_ctx) c.n_ctx = (uint32_t)n_tokens;
    c.embeddings = false; /* the rows compared are the head's of the last token */
    c.n_batch = n_tokens > 1 ? (uint32_t)n_tokens - 1 : 1; /* the prefill in one batch */
    for (int side = 0; side < SIDES; side++) {
        CHECK(clinfer_model_load(path, &params[side], &v->model[side]));
        CHECK(clinfer_context_create(v->model[side], &c, &v->ctx[side]));
    }
    clinfer_model_info info;
    CHECK(clinfer_model_get_info(v->model[DEV], &info));
    snprintf(v->report->device, sizeof v->report->device, "%s", info.backend);
    v->report->n_layer = info.n_layer;
cleanup:
    return st;
}

clinfer_status clinfer_verify(const char *model_path, const clinfer_model_params *device_params,
                              const clinfer_context_params *cp, const int32_t *tokens,
                              size_t n_tokens, clinfer_verify_report **out) {
    clinfer_status st = CLINFER_OK;
    if (!model_path || !tokens || !out)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "verify: NULL argument");
    *out = NULL;
    if (n_tokens == 0 || n_tokens > INT32_MAX)
        return err_fail(CLINFER_ERR_INVALID_ARGUMENT, "verify: %zu tokens", n_tokens);
    verifier v = {.report = calloc(1, sizeof *v.report)};
    if (!v.report) return err_fail(CLINFER_ERR_OUT_OF_MEMORY, "verify: report");
    CHECK(open_sides(&v, model_path, device_params, cp, n_tokens));
    if (n_tokens > 1) CHECK(walk(&v, tokens, n_tokens - 1, "prefill"));
    CHECK(walk(&v, tokens + n_tokens - 1, 1, "decode"));
    CHECK(whole(&v, tokens, n_tokens));
    if (!v.report->n_failed) v.report->first_failed = v.report->n_rows;
    *out = v.report;
    v.report = NULL;
cleanup:
    clinfer_verify_report_free(v.report);
    for (int side = 0; side < SIDES; side++) {
        clinfer_context_free(v.ctx[side]);
        clinfer_model_free(v.model[side]);
        free(v.raw[side]);
        free(v.host[side]);
    }
    return st;
}

void clinfer_verify_report_free(clinfer_verify_report *report) {
    if (report) free(report->rows);
    free(report);
}
