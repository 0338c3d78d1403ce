/*
 * plan_obj.c - the plan object: its arrays, the owner table derived from
 * them, and freeing it.  The planner (plan.c) and the wire decoder
 * (plan_codec.c) both build plans with it, so neither depends on the other.
 */
#include <stdlib.h>

#include "error.h"
#include "plan.h"

void sc__plan_fill_owner(sc_plan *p)
{
    for (uint32_t r = 0; r < p->info.world_size; r++)
        for (uint64_t i = p->rank_off[r]; i < p->rank_off[r + 1]; i++)
            p->owner[p->order[i]] = r;
}

int sc__plan_alloc(uint32_t world_size, uint64_t nshards, sc_plan **out,
                   sc_error *err)
{
    sc_plan *p = calloc(1, sizeof *p);
    if (p) {
        p->order = malloc(sizeof *p->order * nshards);
        p->owner = malloc(sizeof *p->owner * nshards);
        p->rank_off = malloc(sizeof *p->rank_off * ((size_t)world_size + 1));
        p->rank_samples = malloc(sizeof *p->rank_samples * world_size);
    }
    if (!p || !p->order || !p->owner || !p->rank_off || !p->rank_samples) {
        sc_plan_free(p);
        return sc__seterr(err, SC_ENOMEM,
                          "no memory for a plan of %llu shards on %u ranks",
                          (unsigned long long)nshards, world_size);
    }
    p->info.world_size = world_size;
    p->info.nshards = nshards;
    *out = p;
    return SC_OK;
}

void sc_plan_free(sc_plan *plan)
{
    if (!plan)
        return;
    free(plan->order);
    free(plan->owner);
    free(plan->rank_off);
    free(plan->rank_samples);
    free(plan->wire);
    free(plan);
}
