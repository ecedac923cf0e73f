/* team.c: the OpenMP team's size, cut to one thread while the host starves ds's worker threads. When another
 * process keeps a core busy, a worker can start a parallel region a whole scheduler slice late (milliseconds),
 * and every region then waits for it at its barrier: 2-thread work ran ~13x slower than on one thread. A region
 * whose threads arrive more than TEAM_LAG late marks the host starved; ds then runs on one thread for a hold
 * that doubles while starving recurs within ten holds (TEAM_HOLD_MIN .. TEAM_HOLD_MAX) and probes the full team
 * again after it. A worker that went to sleep between calls can also be that late to wake on a VM whose idle
 * vCPU is halted (~3.5 ms seen): a model of many small regions then runs on one thread, which is faster there.
 * Results do not depend on the thread count (fixed chunking), so the bits stay the same. */
#include "internal.h"
#include <omp.h>

#define TEAM_LAG 1e-3       /* seconds: a thread starting a region this late was starved */
#define TEAM_HOLD_MIN 0.05  /* seconds on one thread after a starved region ... */
#define TEAM_HOLD_MAX 2.0   /* ... doubling while it recurs, up to this */

static int full_team;          /* the team size to restore after a hold; 0: not holding */
static double hold_until, hold = TEAM_HOLD_MIN, last_late = -1e30;
static int late;               /* set by a late thread inside a region */
static long starved_count;     /* starved regions seen (ds.info) */

int ds_team(void) {
  if (full_team && omp_get_wtime() >= hold_until) {
    omp_set_num_threads(full_team);
    full_team = 0;
  }
  return omp_get_max_threads();
}

double ds_team_start(void) { return omp_get_wtime(); }

void ds_team_arrive(double t0) {
  if (omp_get_wtime() - t0 > TEAM_LAG) __atomic_store_n(&late, 1, __ATOMIC_RELAXED);
}

void ds_team_done(void) {
  if (!__atomic_exchange_n(&late, 0, __ATOMIC_RELAXED)) return;
  double now = omp_get_wtime();
  starved_count++;
  /* late again soon after the last hold (within ten holds): hold twice as long; after a quiet spell, the least */
  hold = now - last_late < 10 * hold ? (hold * 2 < TEAM_HOLD_MAX ? hold * 2 : TEAM_HOLD_MAX) : TEAM_HOLD_MIN;
  last_late = now;
  if (!full_team) full_team = omp_get_max_threads();
  omp_set_num_threads(1);
  hold_until = now + hold;
}

void ds_team_set(int n) {
  full_team = 0;
  hold = TEAM_HOLD_MIN;
  last_late = -1e30;
  omp_set_num_threads(n);
}

long ds_team_starved(void) { return starved_count; }

/* the team size ds is set to (the full team during a hold) */
int ds_team_configured(void) { return full_team ? full_team : omp_get_max_threads(); }
