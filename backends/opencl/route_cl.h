/* Which of the OpenCL backend's two routes for single-token steps runs the next decode step: one
 * graph launch for the whole step, or a launch per op (the two give the same bits, so any step
 * may take either). The backend's plan_run asks it for every decode step (backend_cl.c).
 *
 * Why choose at all: the graph launch's work-groups spin while they wait for each other, so on
 * a quiet CPU it beats per-op launches (1.2-1.5x), but when other processes want the cores the
 * spinning keeps taking them, and it loses by about 1.1-1.4x (by 1.5-15x before cl/graph.cl's
 * work-groups waited before taking a task, when a descheduled one stalled all the others). So
 * each context's backend instance (each device's part of a split) times its decode steps (wall
 * time, enqueue to the read of the output) and, every so often, runs one step of the other
 * route (a probe), comparing it with the median of the route in use's last steps: a ratio close
 * in time and position, whatever the load or context length did meanwhile. It switches
 * after one probe that wins clearly or two in a row that win at all; probes of a route that keeps
 * losing grow rarer, the more so the more a probe costs (a few % of the time at most), and a
 * probe that comes close brings them back.
 *
 * Pure logic fed step times, so tests drive it with synthetic times (tests/test_route.c). */
#ifndef CLINFER_CL_ROUTE_H
#define CLINFER_CL_ROUTE_H

#include <stdbool.h>

enum { ROUTE_OPS, ROUTE_GRAPH, ROUTE_COUNT };
enum { ROUTE_WINDOW = 5 }; /* step times kept per route */

typedef struct {
    int use;                                 /* the route in use */
    int since_probe;                         /* steps timed since the last probe */
    int interval;                            /* steps between probes */
    bool warm[ROUTE_COUNT];                  /* its first step, which may build kernels, is past */
    double times[ROUTE_COUNT][ROUTE_WINDOW]; /* the last step times per route, ring */
    int n_times[ROUTE_COUNT];                /* pushed so far */
    int wins;                                /* probes in a row that beat the route in use */
    bool running;                            /* a step started (cl_route_start) and not ended */
    int running_route;                       /* its route and start time */
    double running_t0;
} cl_route;

/* Starts on graph launches, the faster route on a quiet CPU. */
void cl_route_init(cl_route *r);

/* The route of the next step: the route in use, or the other one for a probe. */
int cl_route_pick(const cl_route *r);

/* Records a step of route taking ms; returns true where the route in use switched. */
bool cl_route_record(cl_route *r, int route, double ms);

/* A step of route enqueued from t0_ms on, whose time ends at the next wait for the queue (the
 * read of its output): the backend leaves the step to run on rather than waiting for it
 * itself, a wait that cost a split a wake-up of the host per device and step. */
void cl_route_start(cl_route *r, int route, double t0_ms);
/* The running step, if any, done at now_ms: cl_route_record of it. */
bool cl_route_end(cl_route *r, double now_ms);
/* Forgets the running step (its wait failed). */
void cl_route_drop(cl_route *r);

/* The median of the route's recent steps (0: none yet), for the log line of a switch. */
double cl_route_median(const cl_route *r, int route);

#endif
