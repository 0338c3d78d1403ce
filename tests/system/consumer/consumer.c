/* A tiny program built against an installed shardcache, as a user would. */
#include <stdio.h>

#include <shardcache.h>

int main(int argc, char **argv)
{
    uint64_t sizes[10] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5};
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    sc_plan *plan = NULL;
    sc_plan_info info;
    sc_error err = SC_ERROR_INIT;
    int world = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    p.shard_sizes = sizes;
    p.nshards = 10;
    p.world_size = (uint32_t)world;
    p.batch_size = 2;
    if (sc_plan_share(MPI_COMM_WORLD, &p, NULL, &plan, &err) != SC_OK) {
        fprintf(stderr, "consumer: %s: %s\n", sc_strerror(err.code), err.msg);
        MPI_Finalize();
        return 1;
    }
    sc_plan_get_info(plan, &info);
    printf("consumer %s: ok, %llu batches per rank\n", SC_VERSION_STRING,
           (unsigned long long)info.batches_per_rank);
    sc_plan_free(plan);
    MPI_Finalize();
    return 0;
}
