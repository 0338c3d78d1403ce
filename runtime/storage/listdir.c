/*
 * listdir.c - layout B's files from a directory (see listdir.h).
 */
#include "listdir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "h5.h"
#include "invariant.h"
#include "log.h"
#include "scan.h"

/*
 * What the listing left out that holds HDF5 data: files under other names,
 * and subdirectories of taken names; a count and the first name of each.
 */
typedef struct listdir_left {
    uint64_t files, dirs, peeked;
    char file[256], dir[256];
} listdir_left;

/*
 * A name a directory source takes.  Hidden names are left out, as a
 * shell's or Python's glob leaves them: macOS's AppleDouble `._x.h5` (not
 * HDF5) and editors' and copy tools' temporaries are not the dataset.
 */
static int listdir_takes(const char *name)
{
    size_t len = strlen(name);
    return name[0] != '.' && ((len > 3 && !strcmp(name + len - 3, ".h5")) ||
                              (len > 5 && !strcmp(name + len - 5, ".hdf5")));
}

/*
 * Whether directory `path` holds a name listdir_takes among its first
 * LISTDIR_PEEK entries: enough for a directory of HDF5 shards, and a
 * bound on what a listing costs beside 10^5 files (a class directory of
 * JPEGs is not read through).
 */
#define LISTDIR_PEEK 256
#define LISTDIR_SUBDIRS 64 /* subdirectories peeked into, at most */
static int listdir_holds(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int found = 0;
    for (int k = 0; d && !found && k < LISTDIR_PEEK && (e = readdir(d)); k++)
        found = listdir_takes(e->d_name);
    if (d)
        closedir(d);
    return found;
}

/*
 * A name another tool may give an HDF5 file (`x.H5`, `x.hdf`, netCDF-4's
 * `x.nc`): only these are opened to look, so that a listing beside
 * 30,000 sidecar files (`.json`, `.txt`) stays a listing.
 */
static int listdir_maybe_hdf5(const char *name)
{
    static const char *ext[] = {"h5", "hdf5", "hdf", "he5", "hd5", "nc", "nc4"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(dot + 1, ext[i]))
            return 1;
    return 0;
}

/*
 * Counts `path` (named `name`) in l when it is HDF5 data the listing
 * leaves out; one that cannot be opened to look counts too: its name says
 * HDF5, and the user should hear of it.
 */
static void listdir_note(const char *path, const char *name, listdir_left *l)
{
    struct stat st;
    if (name[0] == '.' || stat(path, &st) != 0)
        return;
    if (S_ISREG(st.st_mode) && listdir_maybe_hdf5(name) && H5Fis_hdf5(path) != 0) {
        if (!l->files++ || strcmp(name, l->file) < 0)
            snprintf(l->file, sizeof l->file, "%s", name);
    } else if (S_ISDIR(st.st_mode) && l->peeked++ < LISTDIR_SUBDIRS && listdir_holds(path)) {
        if (!l->dirs++ || strcmp(name, l->dir) < 0)
            snprintf(l->dir, sizeof l->dir, "%s", name);
    }
    H5Eclear2(H5E_DEFAULT);
}

/* Rank 0's warning for what l counted: a silent skip would change the dataset unseen. */
static void listdir_warn(const sc_dataset *ds, const listdir_left *l)
{
    if (l->files)
        sc__log(ds->log_level, SC__LOG_WARN, 0,
                "source '%s': %llu HDF5 file(s) left out, named neither *.h5 nor *.hdf5 "
                "('%s' first): rename them, or give SC_SOURCE a text file listing "
                "every file", ds->path, (unsigned long long)l->files, l->file);
    if (l->dirs)
        sc__log(ds->log_level, SC__LOG_WARN, 0,
                "source '%s': %llu subdirectory(ies) holding *.h5 or *.hdf5 not searched "
                "('%s' first): a directory source takes its own files only; give "
                "SC_SOURCE a text file listing every file", ds->path,
                (unsigned long long)l->dirs, l->dir);
}

static int listdir_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sc__listdir_hdf5(sc_dataset *ds, sc_error *err)
{
    SC__ASSERT(sc__h5_held());
    char buf[SC_PATH_MAX + 512];
    size_t cap = 0;
    listdir_left left = {0};
    int rc = SC_OK;
    DIR *d = opendir(ds->path);
    struct dirent *e;
    if (!d)
        return sc__seterr(err, SC_EIO, "source '%s': %s", ds->path, strerror(errno));
    while (rc == SC_OK && (e = readdir(d))) {
        snprintf(buf, sizeof buf, "%s/%s", ds->path, e->d_name);
        if (listdir_takes(e->d_name))
            rc = sc__scan_add_file(ds, &cap, buf, err);
        else if (ds->rank == 0 && ds->log_level >= SC__LOG_WARN)
            listdir_note(buf, e->d_name, &left);
    }
    closedir(d);
    if (ds->rank == 0)
        listdir_warn(ds, &left);
    if (rc == SC_OK && ds->nfiles > 1)
        qsort(ds->files, ds->nfiles, sizeof *ds->files, listdir_cmp);
    return rc;
}
