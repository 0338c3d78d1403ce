/*
 * cmd_trace.c - `shardcache trace`: merge the ranks' trace files into one
 * timeline, check that a trace is valid JSON, summarize where the
 * consumer's time went, and draw it.
 *
 *   shardcache trace merge DIR|FILES... -o job.json
 *   shardcache trace check FILE
 *   shardcache trace summary job.json
 *   shardcache trace plot job.json -o job.svg
 *
 * The rank files (SC_TRACE=PREFIX: PREFIX.rankR.json) hold one event per
 * line; merge reads them line by line, so that a rank that died mid-job
 * still contributes every epoch it flushed.  summary and plot parse the
 * whole document.
 *
 * This file dispatches; the model a trace is read into is
 * cmd_trace_model.c, the subcommands cmd_trace_merge.c (merge, check),
 * cmd_trace_summary.c and cmd_trace_svg.c (plot).
 */
#include <stdio.h>
#include <string.h>

#include "cmd_trace_model.h"

static const char trace_usage[] =
    "usage: shardcache trace merge DIR|FILE... -o job.json\n"
    "       shardcache trace check FILE\n"
    "       shardcache trace summary job.json\n"
    "       shardcache trace plot job.json -o job.svg\n"
    "\n"
    "A job run with SC_TRACE=PREFIX writes PREFIX.rankR.json on every rank\n"
    "(Chrome Trace Event JSON: open it in Perfetto or chrome://tracing).\n"
    "merge    joins the ranks' files (all *.rankN.json in DIR) into one timeline\n"
    "check    parses a trace and counts its events\n"
    "summary  per rank and for the job: consumer wait as a share of wall time,\n"
    "         the stage the waits overlap most, per-stage busy time and MB/s,\n"
    "         ring occupancy, cache hit rate, shards per batch, stragglers, and a verdict\n"
    "plot     draws each rank's threads over time as SVG, the consumer's\n"
    "         waits as red bands\n";

int cmd_trace(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(trace_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "merge"))
        return cmd_trace_merge(argc - 2, argv + 2);
    if (!strcmp(sub, "check") && argc == 3)
        return cmd_trace_check(argv[2]);
    if (!strcmp(sub, "summary") && argc == 3)
        return cmd_trace_summary(argv[2]);
    if (!strcmp(sub, "plot") && argc == 5 && !strcmp(argv[3], "-o"))
        return cmd_trace_plot(argv[2], argv[4]);
    fputs(trace_usage, stderr);
    return 2;
}
