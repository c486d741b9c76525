/* The choice between graph and per-op decode steps; see route_cl.h. */
#include "route_cl.h"

#include <string.h>

enum {
    INTERVAL_MIN = 4,      /* steps between probes while the routes are close or just switched */
    INTERVAL_BACKOFF = 64, /* doubling stops here: a change of load is seen within it */
    INTERVAL_MAX = 1024,   /* how long a route far behind (BUDGET) goes untried */
    MIN_TIMES = 3,         /* steps of the route in use a probe is compared with, at least */
};
/* Probe / median ratios: a probe this much faster switches at once (contention makes graph
 * steps 1.5-15x slower than per-op ones); two in a row below WIN switch; one above LOSE backs the
 * probes off: their interval doubles up to INTERVAL_BACKOFF, and is at least what keeps a probe's
 * cost within BUDGET of the steps between (a probe 15x slower costs 14 steps: 700 steps). */
#define CLEAR_WIN 0.67
#define WIN 0.97
#define LOSE 1.10
#define BUDGET 0.02

void cl_route_init(cl_route *r) {
    memset(r, 0, sizeof *r);
    r->use = ROUTE_GRAPH;
    r->interval = INTERVAL_MIN;
}

static bool probe_due(const cl_route *r) {
    return r->n_times[r->use] >= MIN_TIMES && r->since_probe >= r->interval;
}

int cl_route_pick(const cl_route *r) {
    return probe_due(r) ? !r->use : r->use;
}

double cl_route_median(const cl_route *r, int route) {
    int n = r->n_times[route] < ROUTE_WINDOW ? r->n_times[route] : ROUTE_WINDOW;
    double v[ROUTE_WINDOW];
    for (int i = 0; i < n; i++) { /* insertion sort: five values at most */
        double x = r->times[route][i];
        int j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void push(cl_route *r, int route, double ms) {
    r->times[route][r->n_times[route]++ % ROUTE_WINDOW] = ms;
}

bool cl_route_record(cl_route *r, int route, double ms) {
    if (route < 0 || route >= ROUTE_COUNT || !(ms >= 0)) return false;
    if (!r->warm[route]) { /* not timed: may have built or loaded kernels */
        r->warm[route] = true;
        return false;
    }
    if (route == r->use) {
        push(r, route, ms);
        r->since_probe++;
        return false;
    }
    double base = cl_route_median(r, r->use);
    if (!(base > 0)) return false; /* nothing to compare with: not a probe */
    double ratio = ms / base;
    push(r, route, ms);
    r->since_probe = 0;
    r->wins = ratio < WIN ? r->wins + 1 : 0;
    bool switching = ratio < CLEAR_WIN || r->wins >= 2;
    if (switching) {
        r->use = route; /* compared from now on with its own steps after the switch */
        r->n_times[route] = 0;
        push(r, route, ms);
        r->wins = 0;
        ratio = 1 / ratio; /* what a probe of the route left costs */
    }
    double interval = ratio > LOSE ? (ratio - 1) / BUDGET : INTERVAL_MIN;
    int doubled = 2 * r->interval < INTERVAL_BACKOFF ? 2 * r->interval : INTERVAL_BACKOFF;
    if (ratio > LOSE && !switching && interval < doubled) interval = doubled;
    r->interval = interval < INTERVAL_MIN   ? INTERVAL_MIN
                  : interval > INTERVAL_MAX ? INTERVAL_MAX
                                            : (int)interval;
    return switching;
}

void cl_route_start(cl_route *r, int route, double t0_ms) {
    r->running = true;
    r->running_route = route;
    r->running_t0 = t0_ms;
}

bool cl_route_end(cl_route *r, double now_ms) {
    if (!r->running) return false;
    r->running = false;
    return cl_route_record(r, r->running_route, now_ms - r->running_t0);
}

void cl_route_drop(cl_route *r) {
    r->running = false;
}
