/*
 * cmd_cache.c - `shardcache cache list|gc|clear`: what this node's caches
 * hold, and reclaiming the ones nothing will read again.
 *
 * The library knows the cache directories (sc_cache_list, sc_cache_remove:
 * the same logic that evicts old caches for a new one): a directory a
 * live job holds (its flock) is never touched; another user's neither.
 * `gc` removes directories whose source changed or is gone (their
 * fingerprint is never asked for again) and private directories of
 * processes that are gone; `clear` removes every directory not in use.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "config.h"

static void cmd_cache_print(const sc_cache_dir_info *d)
{
    char when[32] = "-";
    time_t t = (time_t)d->last_use;
    if (d->last_use)
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
    printf("%s  fingerprint %016llx  local rank %d  %llu entries  %.1f MiB  last use %s  %s"
           "%s  source %s%s\n",
           d->path, (unsigned long long)d->fingerprint, d->local_rank,
           (unsigned long long)d->entries, (double)d->bytes / (1 << 20), when,
           !d->mine ? "unknown" : d->in_use ? "in use" : d->owner_gone ? "owner gone" : "idle",
           d->mine ? "" : " (another user's)", d->source[0] ? d->source : "?",
           d->source_changed ? " (changed)" : "");
}

typedef struct cmd_cache_run {
    int action; /* 0 list, 1 gc, 2 clear */
    int n, failed;
    uint64_t freed;
} cmd_cache_run;

/* What the run's action does with one directory (sc_cache_list's callback). */
static int cmd_cache_act(const sc_cache_dir_info *d, void *arg)
{
    cmd_cache_run *r = arg;
    cmd_cache_print(d);
    r->n++;
    int stale = d->source_changed || d->owner_gone, removed = 0;
    if (r->action == 0 || d->in_use || !d->mine || (r->action == 1 && !stale))
        return 0;
    sc_error err = SC_ERROR_INIT;
    if (sc_cache_remove(d->path, &removed, &err) != SC_OK) {
        fprintf(stderr, "shardcache cache: %s\n", err.msg);
        r->failed = 1;
    } else if (removed) { /* else taken by a job meanwhile: in use after all */
        printf("removed %s\n", d->path);
        r->freed += d->bytes;
    }
    return 0;
}

static int cmd_cache_usage(FILE *to)
{
    fprintf(to, "usage: shardcache cache list|gc|clear [--cache-dir DIR]\n"
                "  list   each cache directory: fingerprint, source, entries, bytes, last use,\n"
                "         in use / idle / owner gone\n"
                "  gc     remove those whose source changed or whose private owner is gone\n"
                "  clear  remove every one not in use\n"
                "  --cache-dir DIR  the root (default: SC_CACHE_DIR, else\n"
                "                   ${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/shardcache-<uid>)\n"
                "A directory a live job holds, or another user's, is never removed.\n");
    return to == stdout ? 0 : 2;
}

int cmd_cache(int argc, char **argv)
{
    static const char *const actions[] = {"list", "gc", "clear"};
    static const struct option longs[] = {{"cache-dir", required_argument, NULL, 'd'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    sc_config cfg;
    if (cli_config(&cfg) != 0)
        return 2;
    int opt, action = -1;
    while ((opt = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (opt == 'h')
            return cmd_cache_usage(stdout);
        if (opt != 'd')
            return cmd_cache_usage(stderr);
        snprintf(cfg.cache_dir, sizeof cfg.cache_dir, "%s", optarg);
    }
    if (optind != argc - 1 || cli_choice("cache", argv[optind], actions, 3, &action) != 0)
        return cmd_cache_usage(stderr);
    char root[SC_PATH_MAX];
    if (sc__cache_root(&cfg, root, sizeof root) != SC_OK) {
        fprintf(stderr, "shardcache cache: the cache root's path is too long\n");
        return 2;
    }
    cmd_cache_run r = {action, 0, 0, 0};
    sc_error err = SC_ERROR_INIT;
    if (sc_cache_list(root, cmd_cache_act, &r, &err) != SC_OK) {
        printf("no caches under %s (%s)\n", root, err.msg);
        return 0;
    }
    printf("%d cache directories under %s%s", r.n, root, action ? "" : "\n");
    if (action)
        printf(", %.1f MiB freed\n", (double)r.freed / (1 << 20));
    return r.failed;
}
