/* clinfer serve: GET /metrics, in Prometheus' text format. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "serve.h"

typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    for (int attempt = 0; attempt < 2 && !b->failed; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
        } else if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        } else {
            size_t cap = 2 * (b->cap + (size_t)n);
            char *grown = realloc(b->data, cap);
            if (!grown) b->failed = true;
            b->data = grown ? grown : b->data;
            b->cap = grown ? cap : b->cap;
        }
    }
}

static void metric(buf *b, const char *name, const char *type, const char *help) {
    put(b, "# HELP clinfer_%s %s\n# TYPE clinfer_%s %s\n", name, help, name, type);
}

char *serve_metrics_text(serve_server *s) {
    static const char *paths[] = {
#define SERVE_ENDPOINT_PATH(name, path) path,
        SERVE_ENDPOINTS(SERVE_ENDPOINT_PATH)};
    uint64_t requests[SERVE_EP_COUNT], classes[6];
    pthread_mutex_lock(&s->lock);
    memcpy(requests, s->requests, sizeof requests);
    memcpy(classes, s->responses_by_class, sizeof classes);
    size_t in_flight = s->in_flight, conns = s->n_conns;
    uint64_t conns_closed = s->conns_closed_slow;
    pthread_mutex_unlock(&s->lock);
    serve_pool_stats ps = {0};
    if (s->pool) serve_pool_get_stats(s->pool, &ps);

    buf b = {malloc(4096), 0, 4096, false};
    if (!b.data) return NULL;
    metric(&b, "requests_total", "counter", "HTTP requests received, by endpoint.");
    for (int e = 0; e < SERVE_EP_COUNT; e++)
        put(&b, "clinfer_requests_total{endpoint=\"%s\"} %llu\n", paths[e],
            (unsigned long long)requests[e]);
    metric(&b, "responses_total", "counter", "HTTP responses sent, by status class.");
    for (int c = 1; c < 6; c++)
        put(&b, "clinfer_responses_total{code=\"%dxx\"} %llu\n", c, (unsigned long long)classes[c]);
    metric(&b, "requests_in_flight", "gauge", "Requests received and not yet fully answered.");
    put(&b, "clinfer_requests_in_flight %zu\n", in_flight);
    metric(&b, "connections_open", "gauge", "Client connections held now.");
    put(&b, "clinfer_connections_open %zu\n", conns);
    metric(&b, "connections_closed_total", "counter",
           "Connections the server closed: past a deadline, or to make room for a newcomer.");
    put(&b, "clinfer_connections_closed_total %llu\n", (unsigned long long)conns_closed);
    metric(&b, "generations_total", "counter", "Generations finished on a slot.");
    put(&b, "clinfer_generations_total %llu\n", (unsigned long long)ps.jobs_done);
    metric(&b, "generations_cancelled_total", "counter",
           "Generations stopped or dropped because their client went away.");
    put(&b, "clinfer_generations_cancelled_total %llu\n", (unsigned long long)ps.jobs_cancelled);
    metric(&b, "prompt_tokens_total", "counter",
           "Prompt tokens evaluated (those a slot held from its last request are not).");
    put(&b, "clinfer_prompt_tokens_total %llu\n", (unsigned long long)ps.prompt_tokens);
    metric(&b, "generated_tokens_total", "counter", "Tokens generated.");
    put(&b, "clinfer_generated_tokens_total %llu\n", (unsigned long long)ps.generated_tokens);
    metric(&b, "batch_steps_total", "counter", "Batches evaluated (each a step of every slot).");
    put(&b, "clinfer_batch_steps_total %llu\n", (unsigned long long)ps.steps);
    metric(&b, "batch_tokens_total", "counter", "Tokens of those batches, prompt and generated.");
    put(&b, "clinfer_batch_tokens_total %llu\n", (unsigned long long)ps.batch_tokens);
    metric(&b, "prompt_tokens_per_second", "gauge",
           "Prefill speed: prompt tokens over the time of the steps that held some (and of "
           "embeddings inputs).");
    put(&b, "clinfer_prompt_tokens_per_second %.3f\n",
        ps.prefill_ms > 0 ? 1e3 * (double)ps.prompt_tokens / ps.prefill_ms : 0.0);
    metric(&b, "generated_tokens_per_second", "gauge",
           "Decode speed of all slots: generated tokens over the time of the steps that decoded.");
    put(&b, "clinfer_generated_tokens_per_second %.3f\n",
        ps.decode_ms > 0 ? 1e3 * (double)ps.generated_tokens / ps.decode_ms : 0.0);
    metric(&b, "time_to_first_token_seconds", "summary",
           "From a request queued to its first text, over finished generations with text.");
    put(&b, "clinfer_time_to_first_token_seconds_sum %.6f\n", ps.ttft_ms / 1e3);
    put(&b, "clinfer_time_to_first_token_seconds_count %llu\n", (unsigned long long)ps.ttft_jobs);
    metric(&b, "queue_depth", "gauge", "Requests waiting for a free slot.");
    put(&b, "clinfer_queue_depth %zu\n", ps.queued);
    metric(&b, "queue_capacity", "gauge", "Requests that may wait; more get 503.");
    put(&b, "clinfer_queue_capacity %zu\n", ps.queue_cap);
    metric(&b, "slots_active", "gauge", "Slots generating now.");
    put(&b, "clinfer_slots_active %zu\n", ps.active);
    metric(&b, "slots", "gauge", "Slots (sequences of the one context, -np).");
    put(&b, "clinfer_slots %zu\n", ps.slots);
    metric(&b, "uptime_seconds", "gauge", "Seconds since the server started.");
    put(&b, "clinfer_uptime_seconds %.3f\n", (cli_now_ms() - s->start_ms) / 1e3);
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    return b.data;
}
