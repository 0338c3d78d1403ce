/*
 * shardcache.c - the `shardcache` command: one subcommand per job step.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} commands[] = {
    {"make-dataset", cmd_make_dataset, "write a synthetic, learnable HDF5 dataset"},
    {"plan", cmd_plan, "compute, broadcast and check epoch plans"},
    {"stage", cmd_stage, "warm node-local caches for the coming epochs"},
    {"cache", cmd_cache, "list node-local caches, reclaim stale ones (gc, clear)"},
    {"scan", cmd_scan, "decode every image once; list the bad samples (a skip list)"},
    {"verify", cmd_verify, "check exactly-once from a job's audit trail"},
    {"trace", cmd_trace, "merge, summarize and plot producer/consumer traces"},
};

static void shardcache_usage(FILE *to)
{
    fprintf(to,
            "usage: shardcache COMMAND [options]\n"
            "       shardcache --version | --help\n\n"
            "Shards a training dataset across MPI ranks each epoch, caches\n"
            "each rank's shards node-locally and checks exactly-once delivery.\n"
            "Commands that talk to other ranks run under mpirun or srun.\n\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-13s %s\n", commands[i].name, commands[i].what);
    fprintf(to, "\n`shardcache COMMAND --help` documents each command's flags.\n");
}

static int shardcache_version(void)
{
    sc_features f;
    sc_features_get(&f);
    printf("shardcache %s\n", SC_VERSION_STRING);
    printf("cuda: %s (%d devices)\nnccl: %s", f.cuda ? "yes" : "no",
           f.cuda_devices, f.nccl ? "yes" : "no");
    if (f.nccl)
        printf(" (%d)", f.nccl_version);
    printf("\njpeg (libjpeg-turbo, SC_DECODE): %s", f.jpeg ? "yes" : "no");
    printf("\nfault hooks: %s\n", f.testing ? "compiled in" : "no");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        shardcache_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        shardcache_usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version"))
        return shardcache_version();
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "shardcache: unknown command '%s'\n\n", argv[1]);
    shardcache_usage(stderr);
    return 2;
}
