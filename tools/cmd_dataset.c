/*
 * cmd_dataset.c - `shardcache make-dataset`: a synthetic dataset whose
 * labels a classifier can learn, in layout A (one file) or B (one file per
 * shard).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scan.h"
#include "synth.h"

static const char usage[] =
    "usage: shardcache make-dataset --out PATH [options]\n"
    "\n"
    "Writes /images (one sample of --shape per row) and /labels (int64) with\n"
    "labels a classifier can learn: each class has a prototype image and a\n"
    "sample is its prototype plus noise.\n"
    "\n"
    "  --out PATH         the HDF5 file (layout A) or directory (layout B)\n"
    "  --samples N        samples (default 10000)\n"
    "  --shape DxDx...    shape of one image (default 3x64x64)\n"
    "  --dtype T          uint8, int8, uint16, int16, uint32, int32, uint64,\n"
    "                     int64, float16, float32, float64 or bool\n"
    "                     (default uint8)\n"
    "  --labels L         classes (default 10)\n"
    "  --layout A|B       A: one file; B: a directory of files (default A)\n"
    "  --shard-size K     layout B: samples per file (default 1024)\n"
    "  --seed S           (default 0)\n"
    "  --noise W          noise half-width in pixel levels, 1..255 (default 64);\n"
    "                     wider makes the classes overlap: a harder set\n"
    "  --smooth           smooth class prototypes in 8 flat bands: with --noise 1\n"
    "                     or 2 the images compress as photos do (for --compress)\n"
    "  --sorted           store the samples by class (contiguous blocks), as\n"
    "                     many image packs are; default: classes in random order\n"
    "  --compress C       gzip (deflate level 4 after the shuffle filter) or lzf\n"
    "                     (h5py's own filter: h5py reads it; written here, no\n"
    "                     plugin needed), in chunks of --chunk\n"
    "  --encode jpeg      each image JPEG-encoded, a variable-length uint8 sample\n"
    "                     (h5py's vlen_dtype(uint8)); needs --shape 3xHxW or 1xHxW\n"
    "  --quality Q        JPEG quality, 1..100 (default 90)\n"
    "  --chunk N          rows per HDF5 chunk (default: 1024 when compressed,\n"
    "                     else contiguous)\n"
    "  --heldout          new samples of the same --seed's classes, none of\n"
    "                     which the training set of that seed holds: a\n"
    "                     held-out set (train --eval)\n"
    "  -h, --help         this text\n";

static int cmd_dataset_parse_shape(const char *s, sc__synth_params *p)
{
    p->ndims = 0;
    while (*s) {
        char *end;
        unsigned long long d = strtoull(s, &end, 10);
        if (end == s || d == 0 || p->ndims == SC_MAX_DIMS || (*end && *end != 'x'))
            return -1;
        p->dims[p->ndims++] = d;
        s = *end ? end + 1 : end;
    }
    return p->ndims ? 0 : -1;
}

/* getopt_long codes of make-dataset's flags, above every short option character. */
enum { OUT = 256, SAMPLES, SHAPE, DTYPE, LABELS, LAYOUT, SHARD_SIZE, SEED, NOISE, SORTED,
       HELDOUT, COMPRESS, CHUNK, SMOOTH, ENCODE, QUALITY };

/* The flags that make one setting together: --encode jpeg and its --quality. */
typedef struct dataset_encode {
    int jpeg;
    uint64_t quality; /* 0: not given */
} dataset_encode;

/* One flag into *p (or *x); 0, or 2 after saying what is wrong. */
static int cmd_dataset_flag(int c, sc__synth_params *p, dataset_encode *x)
{
    int bad = 0;
    switch (c) {
    case OUT: p->out = optarg; break;
    case SAMPLES: bad = cli_u64("--samples", optarg, 1, UINT64_MAX, &p->samples); break;
    case SHAPE:
        if (cmd_dataset_parse_shape(optarg, p)) {
            fprintf(stderr, "shardcache make-dataset: --shape '%s' is not like 3x64x64\n", optarg);
            bad = 2;
        }
        break;
    case DTYPE: p->dtype = optarg; break;
    case LABELS: bad = cli_u64("--labels", optarg, 1, 65536, &p->labels); break;
    case LAYOUT:
        if ((optarg[0] != 'A' && optarg[0] != 'B') || optarg[1]) {
            fprintf(stderr, "shardcache make-dataset: --layout must be A or B\n");
            bad = 2;
        }
        p->layout = optarg[0];
        break;
    case SHARD_SIZE: bad = cli_u64("--shard-size", optarg, 1, UINT64_MAX, &p->shard_size); break;
    case SEED: bad = cli_u64("--seed", optarg, 0, UINT64_MAX, &p->seed); break;
    case NOISE: bad = cli_u64("--noise", optarg, 1, 255, &p->noise); break;
    case SORTED: p->sorted = 1; break;
    case HELDOUT: p->heldout = 1; break;
    case SMOOTH: p->smooth = 1; break;
    case CHUNK: bad = cli_u64("--chunk", optarg, 1, UINT32_MAX, &p->chunk); break;
    case ENCODE: {
        static const char *const encodings[] = {"none", "jpeg"};
        bad = cli_choice("--encode", optarg, encodings, 2, &x->jpeg);
        break;
    }
    case QUALITY: bad = cli_u64("--quality", optarg, 1, 100, &x->quality); break;
    case COMPRESS: {
        static const char *const codecs[] = {"none", "gzip", "lzf"};
        int m = 0;
        bad = cli_choice("--compress", optarg, codecs, 3, &m);
        p->compress = (uint64_t)m;
        break;
    }
    default: bad = 2;
    }
    return bad;
}

/* The flags into *p: 0, -1 after printing the usage, or 2 after saying what is wrong. */
static int cmd_dataset_parse(int argc, char **argv, sc__synth_params *p)
{
    static const struct option longopts[] = {
        {"out", required_argument, 0, OUT},
        {"samples", required_argument, 0, SAMPLES},
        {"shape", required_argument, 0, SHAPE},
        {"dtype", required_argument, 0, DTYPE},
        {"labels", required_argument, 0, LABELS},
        {"layout", required_argument, 0, LAYOUT},
        {"shard-size", required_argument, 0, SHARD_SIZE},
        {"seed", required_argument, 0, SEED},
        {"noise", required_argument, 0, NOISE},
        {"sorted", no_argument, 0, SORTED},
        {"heldout", no_argument, 0, HELDOUT},
        {"smooth", no_argument, 0, SMOOTH},
        {"compress", required_argument, 0, COMPRESS},
        {"chunk", required_argument, 0, CHUNK},
        {"encode", required_argument, 0, ENCODE},
        {"quality", required_argument, 0, QUALITY},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c, bad = 0;
    dataset_encode x = {0, 0};
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        }
        bad = cmd_dataset_flag(c, p, &x);
    }
    if (!bad && x.quality && !x.jpeg) {
        fprintf(stderr, "shardcache make-dataset: --quality is JPEG's: give --encode jpeg too\n");
        bad = 2;
    }
    p->jpeg = x.jpeg ? (x.quality ? x.quality : 90) : 0;
    if (!bad && !p->out) {
        fprintf(stderr, "shardcache make-dataset: --out is required\n");
        bad = 2;
    }
    if (bad)
        fprintf(stderr, "see `shardcache make-dataset --help`\n");
    return bad;
}

/* Layout B: the new directory's manifest, so that jobs open its files without scanning them. */
static int cmd_dataset_manifest(const char *dir, sc_error *err)
{
    sc_config c;
    sc_dataset *ds = NULL;
    int rc = sc_config_init(&c, err);
    if (rc == SC_OK && (size_t)snprintf(c.source, sizeof c.source, "%s", dir) >= sizeof c.source) {
        snprintf(err->msg, sizeof err->msg, "'%.200s...': too long a path", dir);
        rc = err->code = SC_EINVAL;
    }
    if (rc == SC_OK)
        rc = sc_dataset_open(MPI_COMM_SELF, &c, &ds, err);
    if (rc == SC_OK)
        rc = sc__scan_save(ds, err);
    sc_dataset_close(ds);
    return rc;
}

int cmd_make_dataset(int argc, char **argv)
{
    sc__synth_params p = SC__SYNTH_PARAMS_INIT;
    p.samples = 10000;
    int bad = cmd_dataset_parse(argc, argv, &p);
    if (bad)
        return bad < 0 ? 0 : 2;
    MPI_Init(&argc, &argv);
    cli_progress prog;
    cli_progress_init(&prog, "make-dataset");
    sc_error err = SC_ERROR_INIT;
    int rc = sc__dataset_make(&p, cli_progress_cb, &prog, &err);
    sc_error merr = SC_ERROR_INIT;
    int saved = rc == SC_OK && p.layout == 'B' && cmd_dataset_manifest(p.out, &merr) == SC_OK;
    if (rc == SC_OK && p.layout == 'B' && !saved)
        fprintf(stderr, "shardcache make-dataset: warning: no manifest saved (%s): each job "
                "will open every file until `shardcache stage` saves one\n", merr.msg);
    char noise[32] = "", jpeg[48] = ""; /* said when not the default */
    if (p.jpeg)
        snprintf(jpeg, sizeof jpeg, "JPEG quality %" PRIu64 ", ", p.jpeg);
    if (p.noise)
        snprintf(noise, sizeof noise, "noise %" PRIu64 ", ", p.noise);
    if (rc == SC_OK)
        printf("wrote %s: %" PRIu64 " %s%ssamples of %s, %" PRIu64 " labels%s, %s%s%slayout %c\n",
               p.out, p.samples, p.heldout ? "held-out " : "", p.smooth ? "smooth " : "",
               p.dtype, p.labels, p.sorted ? " (class-sorted)" : "", noise,
               p.compress == SC__SYNTH_GZIP ? "gzip, " : p.compress == SC__SYNTH_LZF ? "lzf, " : "",
               jpeg, p.layout);
    if (saved)
        printf("saved %s/.shardcache-manifest: jobs open its files without scanning them\n",
               p.out);
    if (rc == SC_OK && p.jpeg)
        printf("note: SC_DECODE=jpeg decodes these JPEGs in the loader's producers (a random "
               "resized crop every epoch; jpeg-once: once, into the cache)\n");
    if (rc != SC_OK)
        cli_report("make-dataset", 0, 1, &err);
    MPI_Finalize();
    return rc == SC_OK ? 0 : 1;
}
