/*
 * libFuzzer target: sc_plan_decode() on arbitrary bytes must never crash,
 * leak or read out of bounds, and whatever it accepts must re-encode to the
 * same bytes and describe a plan whose shards each have one owner.
 */
#include <stdlib.h>
#include <string.h>

#include "plan_state.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    sc_plan *plan = NULL;
    sc_error err;
    if (sc_plan_decode(data, size, &plan, &err) != SC_OK) {
        if (plan || err.msg[0] == '\0')
            abort(); /* a refusal leaves no plan and always says why */
        return 0;
    }
    void *buf = NULL;
    size_t len = 0;
    if (sc_plan_encode(plan, &buf, &len, &err) != SC_OK || len != size ||
        memcmp(buf, data, size) != 0)
        abort();
    for (uint64_t s = 0; s < plan->info.nshards; s++) {
        uint32_t r;
        if (sc_plan_owner(plan, s, &r) != SC_OK || r >= plan->info.world_size)
            abort();
    }
    free(buf);
    sc_plan_free(plan);
    return 0;
}
