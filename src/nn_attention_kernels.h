/* nn_attention_kernels.h: the attention kernels of one dtype (nn_attention.c includes it through
   float_kernels.h with T, DT and FN(name)): the dense kernel with run_share (units [u0, u1) run by the calling
   thread with a scratch of per elements of its own; 1 when out of memory) and the segment kernel. */

/* a tile runner: units [u0, u1) with a scratch of scratch_elems values */
typedef void (*FN(runner))(const geom *, int64_t, int64_t, T *);
static int FN(run_share)(const geom *g, FN(runner) run, int64_t u0, int64_t u1, int64_t per) {
  T *scr = aligned_alloc(64, (size_t)round_up(per * (int64_t)sizeof(T), 64));
  if (!scr) return 1;
  run(g, u0, u1, scr);
  free(scr);
  return 0;
}
int FN(ds_scaled_dot_product_attention)(ds_tensor *const *t, const double *attrs) {
  geom g;
  int rc = make_geom(&g, t, attrs, DT);
  if (rc) return rc;
  if (g.nb == 0 || g.L == 0 || g.Ev == 0) return DS_OK;
  DS_CHECK(g.S > 0, "scaled_dot_product_attention: no keys (S = 0)");
  FN(runner) run;
  int mr = 1;
  int64_t per = g.Sp;              /* the direct runner: units of one query row, scratch of Sp scores */
  if (g.L > FN(pick_direct)(&run)) { mr = FN(pick)(&run); per = scratch_elems(&g, mr); }
  int64_t tiles = (g.L + mr - 1) / mr, units = g.nb * tiles;
  double work = 2.0 * (double)g.nb * (double)g.L * (double)g.S * (double)(g.E + g.Ev);
  int failed = 0;
  if (units > 1 && work >= PAR_FLOPS && ds_team() > 1) {
    double t0 = ds_team_start();
#pragma omp parallel
    {
      ds_team_arrive(t0);
      int nt = omp_get_num_threads(), me = omp_get_thread_num();
      /* consecutive units: K, V packed once */
      if (FN(run_share)(&g, run, units * me / nt, units * (me + 1) / nt, per)) {
#pragma omp atomic write
        failed = 1;
      }
    }
    ds_team_done();
  } else failed = FN(run_share)(&g, run, 0, units, per);   /* no inactive region: it costs ~1.2 us */
  return failed ? ds_fail(DS_ENOMEM, "scaled_dot_product_attention: out of memory for scratch") : DS_OK;
}

/* a one-row segment's heads all at once (the f32 AVX-512 build: decode_heads_f32); 0 when it does not apply */
typedef int (*FN(heads_runner))(const geom *, int64_t, int64_t, int64_t, int64_t, T *);
/* (sequence, head) unit u of a segment call: its queries over its keys, the direct runner for few queries; with
   heads (not NULL), a head-0 unit of one query row runs all the sequence's heads. Returns the units done. */
static int64_t FN(segment_unit)(const geom *g0, const segment *sg, ds_tensor *const *t, int64_t u, FN(runner) run,
    int mr, FN(runner) direct, int64_t direct_l, FN(heads_runner) heads, T *scr) {
  ds_tensor *q = t[1], *k = t[2], *v = t[3];
  int64_t H = q->shape[1];
  const segment *s = &sg[u / H];
  int64_t h = u % H;
  if (s->nq == 0 || s->nk == 0) return 1;
  geom g = *g0;
  g.L = s->nq; g.S = s->nk; g.Sp = round_up(s->nk, NR);
  g.q = (const T *)q->data + s->q0 * q->strides[0] + h * q->strides[1];
  g.k = (const T *)k->data + s->k0 * k->strides[0] + h * k->strides[1];
  g.v = (const T *)v->data + s->k0 * v->strides[0] + h * v->strides[1];
  g.out = (T *)t[0]->data + s->q0 * g.orow + h * g.Ev;
  if (heads && h == 0 && heads(&g, H, q->strides[1], k->strides[1], v->strides[1], scr)) return H;
  if (g.L <= direct_l) direct(&g, 0, g.L, scr);   /* its Sp scores fit the tile scratch */
  else run(&g, 0, (g.L + mr - 1) / mr, scr);
  return 1;
}

int FN(ds_segment_attention)(ds_tensor *const *t, const double *attrs) {
  geom g0;
  segment *sg = NULL;
  int rc = segment_geom(&g0, t, attrs, DT, &sg);
  if (rc) return rc;
  ds_tensor *o = t[0], *q = t[1];
  int64_t B = t[4]->shape[0], H = q->shape[1], units = B * H, maxS = 0, covered = 0;
  double work = 0;
  memset(o->data, 0, (size_t)o->numel * sizeof(T));   /* rows outside every sequence */
  for (int64_t b = 0; b < B; b++) {
    if (sg[b].nq == 0 || sg[b].nk == 0) continue;
    if (sg[b].nk > maxS) maxS = sg[b].nk;
    covered += sg[b].nq;
    work += 2.0 * (double)H * (double)sg[b].nq * (double)sg[b].nk * (double)(g0.E + g0.Ev);
  }
  FN(runner) run, direct;
  int mr = FN(pick)(&run);
  int64_t direct_l = FN(pick_direct)(&direct);
  geom gm = g0;
  gm.S = maxS; gm.Sp = round_up(maxS, NR);
  int64_t per = scratch_elems(&gm, mr);
  size_t bytes = (size_t)round_up(per * (int64_t)sizeof(T), 64);
  int failed = 0;
  if (covered > 0 && g0.Ev > 0 && units > 1 && work >= PAR_FLOPS && ds_team() > 1) {
#pragma omp parallel
    {
      T *scr = aligned_alloc(64, bytes);
      if (!scr) {
#pragma omp atomic write
        failed = 1;
      }
#pragma omp for schedule(dynamic)
      for (int64_t u = 0; u < units; u++)
        if (scr) FN(segment_unit)(&g0, sg, t, u, run, mr, direct, direct_l, NULL, scr);
      free(scr);
    }
  } else if (covered > 0 && g0.Ev > 0) {   /* no inactive region: it costs ~1.2 us */
    T *scr = aligned_alloc(64, bytes);
    if (!scr) failed = 1;
    for (int64_t u = 0; scr && u < units;)   /* its 4 Sp scores fit the tile scratch (mr >= 4) */
      u += FN(segment_unit)(&g0, sg, t, u, run, mr, direct, direct_l, FN(pick_heads)(), scr);
    free(scr);
  }
  free(sg);
  return failed ? ds_fail(DS_ENOMEM, "segment_attention: out of memory for scratch") : DS_OK;
}

#undef T
#undef DT
#undef FN
