/* test_similar.c - analyze/similar/: the normalization of a line (each placeholder, and what
 * must stay), the error lines, the exception type, and the search: a document finds itself
 * first, scores are symmetric and in 0..1, the order is the same from run to run, and the shipped
 * cases load (CRASHPACK_DATA_DIR). */
#include "corpus.h"
#include "similar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;

static void norm(const char *in, const char *want)
{
    char out[512];
    sim_normalize_line(in, strlen(in), out, sizeof(out));
    if (strcmp(out, want)) {
        fprintf(stderr, "FAIL: normalize `%s`:\n  got  `%s`\n  want `%s`\n", in, out, want);
        fails++;
    }
}

static void expect(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAIL: %s\n", what);
        fails++;
    }
}

static void normalization(void)
{
    norm("File \"/home/u/x/train.py\", line 42, in main", "file \"<path>\", line <n>, in main");
    norm("[rank3]: RuntimeError: CUDA error", "[<rank>]: runtimeerror: cuda error");
    norm("rank 12 failed; local_rank=3", "<rank> failed; local_<rank>");
    norm("[default5]:Traceback", "[<rank>]:traceback");
    norm("at 0x7f3a2b1c00 in libc", "at <addr> in libc");
    norm("2024-03-01T12:00:01.123Z and 12:34:56", "<time> and <time>");
    norm("2024-03-01 12:00:01,5 INFO", "<time> info");
    norm("connect to 10.0.0.12:29500 refused", "connect to <ip> refused");
    norm("uuid GPU-4b1c1f8e-3a2d-4e5f-9a0b-1c2d3e4f5a6b", "uuid gpu-<uuid>");
    norm("DataLoader worker (pid 4123) is killed", "dataloader worker (pid <pid>) is killed");
    norm("exitcode: -9 float16 sm_80", "exitcode: -<n> float16 sm_<n>");
    norm("Tried to allocate 2.00 GiB (1.5e+03 MiB)", "tried to allocate <n> gib (<n> mib)");
    norm("  two   blanks\tand a tab  ", "two blanks and a tab");
    norm("and/or N/A", "and/or n/a");
}

static void lines_and_types(void)
{
    const char *text = "epoch 1\nloss 0.3\nRuntimeError: CUDA out of memory\nbye\n";
    const char *l[4];
    size_t n[4];
    size_t k = sim_error_lines(text, l, n, 4);
    expect(k == 1 && !strncmp(l[0], "RuntimeError", 12), "error lines: the one error line");
    k = sim_error_lines("a\nb\nc\n", l, n, 2);
    expect(k == 2 && l[0][0] == 'b' && l[1][0] == 'c',
           "error lines: none reads as an error: the last lines");
    char buf[64];
    const char *t =
        sim_exception_type("Traceback:\n[rank0]: torch.OutOfMemoryError: x\n", buf, sizeof(buf));
    expect(t && !strcmp(t, "torch.OutOfMemoryError"), "exception type after a rank prefix, dotted");
    expect(!sim_exception_type("error: no type here\n", buf, sizeof(buf)), "no exception type");
}

static struct sim_feat *feats(const char *text, size_t *n)
{
    struct sim_feat *f = NULL;
    if (sim_features(text, NULL, NULL, &f, n))
        exit(2);
    return f;
}

static void search(void)
{
    static const char *docs[] = {
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error.",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: exitcode: -9",
        "RuntimeError: NCCL error: unhandled system error, NCCL version 2.18.1",
    };
    struct sim_index *ix = sim_index_new();
    for (size_t i = 0; i < 4; i++) {
        size_t n;
        struct sim_feat *f = feats(docs[i], &n);
        expect(!sim_index_add(ix, f, n), "index add");
    }
    expect(!sim_index_finish(ix) && sim_index_size(ix) == 4, "index finish");
    size_t nq;
    struct sim_feat *q =
        feats("RuntimeError: DataLoader worker (pid 31337) is killed by signal: Bus error.", &nq);
    struct sim_hit h[4], h2[4];
    size_t k = sim_query(ix, q, nq, 0, h, 4);
    expect(k >= 1 && h[0].doc == 1 && fabs(h[0].score - 1) < 1e-9,
           "another pid: the same case, score 1");
    for (size_t i = 1; i < k; i++)
        expect(h[i].score <= h[i - 1].score && h[i].score >= 0, "best first, in 0..1");
    size_t k2 = sim_query(ix, q, nq, 0, h2, 4);
    expect(k2 == k && !memcmp(h, h2, k * sizeof(*h)), "the same answer twice");
    expect(sim_query(ix, q, nq, 1.5, h2, 4) == 0, "a minimum over 1: nothing");
    free(q);
    sim_index_free(ix);
}

int main(void)
{
    normalization();
    lines_and_types();
    search();
    char err[512] = "";
    struct sim_corpus *c = sim_corpus_load("cgd-12-pow-nan", err, sizeof(err));
    expect(c && sim_corpus_size(c) >= 80, "the shipped cases load (CRASHPACK_DATA_DIR)");
    if (!c)
        fprintf(stderr, "  %s\n", err);
    sim_corpus_free(c);
    if (fails)
        fprintf(stderr, "%d failure(s)\n", fails);
    else
        printf("all checks passed\n");
    return fails != 0;
}
