/*
 * libFuzzer target: cli_audit_parse() (how `shardcache verify` reads each
 * audit-r<rank>.bin) on arbitrary bytes must never crash, leak or read out
 * of bounds.  The input is four bytes of setting, then the file's bytes:
 * the rank being read, the world size rank 0's file said (for rank > 0),
 * and how many records earlier files left in the list and how much room
 * beyond them, so that appending is exercised too.  Accepted bytes append
 * one record per whole (epoch, id) pair, each exactly as written, of a
 * rank below the world size; refused ones say why and change nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 4)
        return 0;
    uint64_t rank = data[0] % 4, world = data[1] % 6, before = data[2] % 5;
    uint64_t n = before, world0 = world;
    size_t cap = before + data[3] % 3;
    const unsigned char *file = data + 4;
    size_t len = size - 4;
    cli_audit_rec *recs = malloc(sizeof *recs * (cap ? cap : 1)), *old = recs;
    for (uint64_t i = 0; i < n; i++)
        recs[i] = (cli_audit_rec){i, i, 9};
    char why[160] = "";
    int rc = cli_audit_parse(file, len, rank, &world, &recs, &n, &cap, why, sizeof why);
    if (rc != 0) {
        if (rc != 1 || !why[0] || recs != old || n != before || world != world0)
            abort(); /* bad bytes: said why, nothing changed */
        free(recs);
        return 0;
    }
    uint64_t head[3], pairs = (len - sizeof head) / 16;
    memcpy(head, file, sizeof head);
    if (head[0] != SC_AUDIT_MAGIC || head[1] != rank || world != head[2] || rank >= world ||
        (rank > 0 && world != world0) || n != before + pairs || cap < n)
        abort();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t pair[2] = {i, i};
        if (i >= before)
            memcpy(pair, file + sizeof head + 16 * (i - before), sizeof pair);
        if (recs[i].epoch != pair[0] || recs[i].id != pair[1] ||
            recs[i].rank != (i < before ? 9 : rank))
            abort();
    }
    free(recs);
    return 0;
}
