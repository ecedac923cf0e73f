/* team.c: the OpenMP team's size, cut to one thread while the host starves ds's worker threads. When another
 * process keeps a core busy, a worker can start a parallel region a whole scheduler slice late (milliseconds),
 * and every region then waits for it at its barrier: 2-thread work ran ~13x slower than on one thread. A region
 * whose threads arrive more than TEAM_LAG late is a starved region. One alone is not a busy host: a VM's
 * hypervisor can stall a vCPU now and then, and a worker that went to sleep between calls can be that late to
 * wake (~3.5 ms seen on a VM whose idle vCPU is halted). So a hold starts at a starved region within TEAM_RECUR
 * of the one before or of the end of the last hold: ds then runs on one thread for a hold that doubles while
 * holds recur within ten holds (TEAM_HOLD_MIN .. TEAM_HOLD_MAX) and probes the full team again after it. A busy
 * host starves nearly every region, and calls that each wake a sleeping worker starve one region per call, so
 * both hold from their second starved region on; a lone stall costs that one region, not 50 ms on one thread.
 * Results do not depend on the thread count (fixed chunking), so the bits stay the same. */
#include "internal.h"
#include <omp.h>

#define TEAM_LAG 1e-3       /* seconds: a thread starting a region this late was starved */
#define TEAM_RECUR 0.05     /* seconds: a starved region this soon after the last one starts a hold */
#define TEAM_HOLD_MIN 0.05  /* seconds on one thread at the first hold ... */
#define TEAM_HOLD_MAX 2.0   /* ... doubling while it recurs, up to this */

static int full_team;          /* the team size to restore after a hold; 0: not holding */
static double hold_until = -1e30, hold = TEAM_HOLD_MIN, last_hold = -1e30, last_starved = -1e30;
static int late;               /* set by a late thread inside a region */
static long starved_count;     /* starved regions seen (ds.info) */
static long hold_count;        /* holds on one thread started (ds.info) */

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
  /* soon after the last starved region, or soon after a hold ended (the host still busy) */
  int recurs = now - last_starved < TEAM_RECUR || now - hold_until < TEAM_RECUR;
  last_starved = now;
  if (!recurs) return;
  hold_count++;
  /* a hold soon after the last one (within ten holds): twice as long; after a quiet spell, the least */
  hold = now - last_hold < 10 * hold ? (hold * 2 < TEAM_HOLD_MAX ? hold * 2 : TEAM_HOLD_MAX) : TEAM_HOLD_MIN;
  last_hold = now;
  if (!full_team) full_team = omp_get_max_threads();
  omp_set_num_threads(1);
  hold_until = now + hold;
}

void ds_team_set(int n) {
  full_team = 0;
  hold = TEAM_HOLD_MIN;
  last_hold = last_starved = hold_until = -1e30;
  omp_set_num_threads(n);
}

long ds_team_starved(void) { return starved_count; }

long ds_team_holds(void) { return hold_count; }

/* the team size ds is set to (the full team during a hold) */
int ds_team_configured(void) { return full_team ? full_team : omp_get_max_threads(); }
