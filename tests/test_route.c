/* The choice between graph and per-op decode steps (backends/opencl/route_cl.h), fed synthetic
 * step times:
 *   - quiet: graph steps 10 ms, per-op 13 ms: graph stays, its probes of per-op grow rare;
 *   - contention from the start: graph 40 ms, per-op 12 ms: per-op after the first timed probe;
 *   - contention that comes and goes: each change is followed within a bounded number of steps;
 *   - heavy contention (graph 15x slower): the probes of graph launches cost under 3 %;
 *   - close routes (per-op 2 % slower, then 2 % faster with jitter): no switch on noise alone,
 *     a switch after two winning probes in a row;
 *   - an outlier probe (a single lucky step) does not switch by itself;
 *   - each route's first step (kernels built) is not timed, bad times are ignored;
 *   - a step started and ended later (its time running to the read of its output) is recorded
 *     as its time from start to end, once; a dropped one (its wait failed) is not. */
#include <stdio.h>

#include "check.h"
#include "opencl/route_cl.h"

/* Runs n steps where route r takes ms[r]; returns how many ran on each route and counts
 * switches. */
static void run(cl_route *r, int n, const double ms[ROUTE_COUNT], int ran[ROUTE_COUNT],
                int *switches) {
    for (int i = 0; i < n; i++) {
        int pick = cl_route_pick(r);
        ran[pick]++;
        if (cl_route_record(r, pick, ms[pick])) ++*switches;
    }
}

static void test_quiet(void) {
    cl_route r;
    cl_route_init(&r);
    EXPECT(cl_route_pick(&r) == ROUTE_GRAPH, "starts on graph launches");
    int ran[ROUTE_COUNT] = {0}, switches = 0;
    run(&r, 1000, (double[]){13, 10}, ran, &switches);
    EXPECT(switches == 0 && r.use == ROUTE_GRAPH, "quiet: %d switches", switches);
    /* probes back off to one per 64 steps: about 15 of 1000, a few more while backing off */
    EXPECT(ran[ROUTE_OPS] >= 10 && ran[ROUTE_OPS] <= 25, "quiet: %d per-op probes", ran[ROUTE_OPS]);
    EXPECT(cl_route_median(&r, ROUTE_GRAPH) == 10, "median %g", cl_route_median(&r, ROUTE_GRAPH));
}

static void test_contention(void) {
    cl_route r;
    cl_route_init(&r);
    int ran[ROUTE_COUNT] = {0}, switches = 0;
    /* 1 untimed + 4 timed graph steps, the untimed first per-op step, one probe */
    run(&r, 7, (double[]){12, 40}, ran, &switches);
    EXPECT(switches == 1 && r.use == ROUTE_OPS, "contention: on %d after 7 steps", r.use);
    run(&r, 993, (double[]){12, 40}, ran, &switches);
    EXPECT(switches == 1, "contention: %d switches", switches);
    EXPECT(ran[ROUTE_GRAPH] <= 4 + 25, "contention: %d graph steps", ran[ROUTE_GRAPH]);
}

static void test_changing(void) {
    cl_route r;
    cl_route_init(&r);
    int ran[ROUTE_COUNT] = {0}, switches = 0;
    run(&r, 300, (double[]){13, 10}, ran, &switches); /* quiet: probes at their rarest */
    EXPECT(r.use == ROUTE_GRAPH && switches == 0, "changing: quiet start");
    int steps = 0;
    while (r.use == ROUTE_GRAPH && steps < 1000) {
        run(&r, 1, (double[]){15, 60}, ran, &switches); /* contention */
        steps++;
    }
    /* the next probe comes within 64 steps; its ratio (15 / 60) wins clearly at once */
    EXPECT(r.use == ROUTE_OPS && steps <= 65, "changing: per-op after %d loaded steps", steps);
    run(&r, 300, (double[]){15, 60}, ran, &switches);
    steps = 0;
    while (r.use == ROUTE_OPS && steps < 1000) {
        run(&r, 1, (double[]){13, 10}, ran, &switches); /* quiet again */
        steps++;
    }
    /* graph probes 4x slower came every (4 - 1) / 2 % = 150 steps; then the window still holds
     * loaded per-op steps for a few steps, and two winning probes are needed */
    EXPECT(r.use == ROUTE_GRAPH && steps <= 150 + 2 * 4 + 8, "changing: graph after %d steps",
           steps);
    EXPECT(switches == 2, "changing: %d switches", switches);
}

/* Graph steps 15x slower (a busy machine): the probes of graph launches cost within 3 % of the
 * time of per-op steps alone, though each costs 14 steps. */
static void test_heavy(void) {
    cl_route r;
    cl_route_init(&r);
    int ran[ROUTE_COUNT] = {0}, switches = 0;
    run(&r, 7, (double[]){100, 1500}, ran, &switches);
    EXPECT(r.use == ROUTE_OPS, "heavy: per-op after 7 steps");
    ran[ROUTE_OPS] = ran[ROUTE_GRAPH] = 0;
    run(&r, 3000, (double[]){100, 1500}, ran, &switches);
    double total = 100.0 * ran[ROUTE_OPS] + 1500.0 * ran[ROUTE_GRAPH];
    EXPECT(total <= 1.03 * 100 * 3000, "heavy: %d graph probes, %.1f %% over per-op alone",
           ran[ROUTE_GRAPH], (total / (100.0 * 3000) - 1) * 100);
}

static void test_close(void) {
    cl_route r;
    cl_route_init(&r);
    int ran[ROUTE_COUNT] = {0}, switches = 0;
    run(&r, 500, (double[]){10.2, 10.0}, ran, &switches); /* per-op 2 % slower: stay */
    EXPECT(switches == 0 && r.use == ROUTE_GRAPH, "close: %d switches", switches);
    /* per-op 4 % faster, graph steps jittering around 10: two winning probes in a row */
    int steps = 0;
    static const double jitter[] = {10.0, 9.8, 10.3, 10.1, 9.9};
    while (r.use == ROUTE_GRAPH && steps < 100) {
        run(&r, 1, (double[]){9.6, jitter[steps % 5]}, ran, &switches);
        steps++;
    }
    EXPECT(r.use == ROUTE_OPS && steps <= 2 * 4 + 5, "close: per-op after %d steps", steps);
}

static void test_outlier(void) {
    cl_route r;
    cl_route_init(&r);
    int ran[ROUTE_COUNT] = {0}, switches = 0;
    run(&r, 100, (double[]){13, 10}, ran, &switches);
    /* run up to the next probe, give it a lucky 8.5 ms (not a clear win), then back to normal */
    while (cl_route_pick(&r) == ROUTE_GRAPH)
        run(&r, 1, (double[]){13, 10}, ran, &switches);
    EXPECT(!cl_route_record(&r, ROUTE_OPS, 8.5), "one lucky probe switched");
    run(&r, 200, (double[]){13, 10}, ran, &switches);
    EXPECT(switches == 0 && r.use == ROUTE_GRAPH, "outlier: %d switches", switches);
}

static void test_untimed(void) {
    cl_route r;
    cl_route_init(&r);
    EXPECT(!cl_route_record(&r, ROUTE_GRAPH, 5000), "first graph step");
    EXPECT(cl_route_median(&r, ROUTE_GRAPH) == 0, "the first step was timed");
    EXPECT(!cl_route_record(&r, ROUTE_GRAPH, -1) && !cl_route_record(&r, 7, 1),
           "a bad time or route");
    EXPECT(!cl_route_record(&r, ROUTE_OPS, 1), "first per-op step");
    EXPECT(!cl_route_record(&r, ROUTE_OPS, 1), "a probe with nothing to compare with");
    EXPECT(r.use == ROUTE_GRAPH, "switched with nothing to compare with");
}

static void test_running(void) {
    cl_route r;
    cl_route_init(&r);
    EXPECT(!cl_route_end(&r, 100), "an end without a start");
    cl_route_start(&r, ROUTE_GRAPH, 0); /* the first, untimed */
    EXPECT(r.running && !cl_route_end(&r, 5000) && !r.running, "the first step");
    for (int i = 0; i < 4; i++) {
        cl_route_start(&r, ROUTE_GRAPH, 100.0 * i);
        cl_route_end(&r, 100.0 * i + 10);
    }
    EXPECT(cl_route_median(&r, ROUTE_GRAPH) == 10, "median %g of steps of 10 ms",
           cl_route_median(&r, ROUTE_GRAPH));
    EXPECT(!cl_route_end(&r, 1000), "a second end of one step");
    cl_route_start(&r, ROUTE_GRAPH, 1000);
    cl_route_drop(&r);
    EXPECT(!r.running && !cl_route_end(&r, 9000) && cl_route_median(&r, ROUTE_GRAPH) == 10,
           "a dropped step was recorded");
}

int main(void) {
    test_quiet();
    test_contention();
    test_changing();
    test_heavy();
    test_close();
    test_outlier();
    test_untimed();
    test_running();
    return finish("test_route");
}
