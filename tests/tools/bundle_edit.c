/* bundle_edit.c - test helper: rewrite a bundle with members dropped, replaced or added.
 *
 *   bundle_edit IN OUT [--drop NAME]... [--put NAME FILE]...
 *   bundle_edit - OUT --put NAME FILE...   a new bundle of just the members put, in their order
 *
 * Reads IN with crashpack's reader (bundle/bundle.c) and writes OUT with the capture handler's
 * writer (bundle/bundlew.c), so OUT is a complete, indexed bundle in the real format: members
 * keep their order; --put replaces a member's content, or adds the member before capture.json
 * (the finisher's place for stacks.json) or at the end. The core is copied in 4 MiB frames.
 * Used by tests/e2e/test_enrich.sh to hand-edit stacks.json. Exit 0 ok, 1 error, 2 usage.
 */
#include "bundle.h"
#include "bundlew.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_EDITS 32
#define CHUNK (4u << 20)

struct edit {
    const char *name, *file; /* file NULL: drop */
    int done;
};

static int read_file(const char *path, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                b = NULL;
            }
            b = nb;
        }
    }
    fclose(f);
    *buf = b;
    *len = n;
    return b ? 0 : -1;
}

static int put_file(struct bw *w, const struct edit *e)
{
    char *buf;
    size_t len;
    if (read_file(e->file, &buf, &len)) {
        fprintf(stderr, "bundle_edit: cannot read %s\n", e->file);
        return -1;
    }
    int rc = bw_add(w, e->name, buf, len);
    free(buf);
    return rc;
}

static int copy_member(struct bundle *b, struct bw *w, const struct bundle_member *m)
{
    if (m->size <= CHUNK) {
        char *buf = NULL;
        size_t len = 0;
        int rc = bundle_read_all(b, m->name, CHUNK, &buf, &len);
        if (rc && rc != BUNDLE_ETRUNC) {
            free(buf);
            return -1;
        }
        rc = bw_add(w, m->name, buf ? buf : "", len);
        free(buf);
        return rc;
    }
    if (bw_begin(w, m->name, m->size))
        return -1;
    char *buf = malloc(CHUNK);
    for (uint64_t off = 0; buf && off < m->available;) {
        size_t got = 0;
        int rc = bundle_read(b, m, off, buf, CHUNK, &got);
        if (got == 0 || bw_data(w, buf, got))
            break;
        off += got;
        if (rc)
            break;
    }
    free(buf);
    return bw_end(w, CHUNK) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct edit ed[MAX_EDITS];
    int ne = 0;
    if (argc < 3) {
        fprintf(stderr, "usage: bundle_edit IN OUT [--drop NAME]... [--put NAME FILE]...\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        if (ne == MAX_EDITS)
            return 2;
        if (!strcmp(argv[i], "--drop") && i + 1 < argc)
            ed[ne++] = (struct edit){argv[i + 1], NULL, 0}, i += 1;
        else if (!strcmp(argv[i], "--put") && i + 2 < argc)
            ed[ne++] = (struct edit){argv[i + 1], argv[i + 2], 0}, i += 2;
        else {
            fprintf(stderr, "bundle_edit: bad argument %s\n", argv[i]);
            return 2;
        }
    }
    struct bundle *b = NULL;
    char err[512];
    if (strcmp(argv[1], "-") && bundle_open(argv[1], &b, err, sizeof(err))) {
        fprintf(stderr, "bundle_edit: %s\n", err);
        return 1;
    }
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    struct bw w;
    if (fd < 0 || bw_init(&w, fd, 1, 0)) {
        fprintf(stderr, "bundle_edit: cannot write %s\n", argv[2]);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; b && i < bundle_member_count(b) && !rc; i++) {
        const struct bundle_member *m = bundle_member(b, i);
        struct edit *e = NULL;
        for (int k = 0; k < ne; k++)
            if (!strcmp(ed[k].name, m->name))
                e = &ed[k];
        if (!strcmp(m->name, "capture.json"))
            for (int k = 0; k < ne && !rc; k++)
                if (ed[k].file && !ed[k].done && !bundle_find(b, ed[k].name)) {
                    rc = put_file(&w, &ed[k]);
                    ed[k].done = 1;
                }
        if (rc)
            break;
        if (e) {
            e->done = 1;
            rc = e->file ? put_file(&w, e) : 0;
        } else {
            rc = copy_member(b, &w, m);
        }
    }
    for (int k = 0; k < ne && !rc; k++)
        if (ed[k].file && !ed[k].done)
            rc = put_file(&w, &ed[k]);
    if (!rc)
        rc = bw_finish(&w);
    bw_free(&w);
    if (b)
        bundle_close(b);
    if (rc || fsync(fd) || close(fd)) {
        fprintf(stderr, "bundle_edit: writing %s failed\n", argv[2]);
        return 1;
    }
    return 0;
}
