/* The one monotonic clock of the library's timings (profile, route, build logs). */
#ifndef CLINFER_CLOCK_H
#define CLINFER_CLOCK_H

/* Milliseconds on CLOCK_MONOTONIC. */
double clock_now_ms(void);

#endif
