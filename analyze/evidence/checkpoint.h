/* checkpoint.h - is a checkpoint file intact? Structural checks that read only metadata: a
 * torch.save zip (PyTorch >= 1.6) through libzip (end of central directory, ZIP64 too, every
 * entry inside the file), a safetensors file (header length, JSON header through cJSON, tensor
 * offsets inside the file); legacy pickle checkpoints are named but cannot be verified. Plus the
 * newest intact checkpoint in a directory, for when the newest one is not. A library: it never
 * prints, so the capture handler's finisher and `crashpack checkpoint` share it. */
#ifndef CRASHPACK_CHECKPOINT_H
#define CRASHPACK_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

enum ckv_verdict { CKV_VALID, CKV_TRUNCATED, CKV_UNREADABLE, CKV_UNVERIFIABLE };

struct ckv_result {
    enum ckv_verdict verdict;
    const char *format; /* "torch-zip", "zip", "safetensors", "torch-legacy", "pickle", "unknown" */
    char reason[512];
    int have_stat; /* the fields below are set */
    uint64_t size, inode;
    unsigned dev_major, dev_minor;
    int64_t mtime;
    long mtime_nsec;
    uint64_t entries; /* zip entries or safetensors tensors */
};

/* "valid", "truncated", "unreadable", "unverifiable" */
const char *ckv_verdict_name(enum ckv_verdict v);

/* 1 when the name ends in .pt .pth .bin .ckpt .safetensors (any case). */
int ckv_is_checkpoint_name(const char *name);

/* Checks the file open on fd (for reading, any offset; left open). */
enum ckv_verdict ckv_check_fd(int fd, struct ckv_result *r);

/* Checks dirfd/name. The last component is followed only when `follow`; only a regular file is
 * ever opened (O_NONBLOCK), so a FIFO or a device is reported, not opened. */
enum ckv_verdict ckv_check_at(int dirfd, const char *name, int follow, struct ckv_result *r);

#define CKV_SCAN_MAX 32

struct ckv_scan {
    struct {
        char name[256];
        struct ckv_result r;
    } items[CKV_SCAN_MAX]; /* checked, newest first */
    size_t n;
    int valid;         /* index of the first (newest) valid one in items, or -1 */
    size_t candidates; /* checkpoint-like regular files seen in the directory */
    int stopped;       /* the count or time budget ran out before a valid one was found */
};

/* Checks the checkpoint-like regular files of dirfd newest first (by mtime), skipping the file
 * `skip` (same device and inode) when non-NULL, until one is valid, CKV_SCAN_MAX were checked or
 * budget_ms has passed. Returns 0, or -1 with errno when the directory cannot be read. */
int ckv_scan_dir(int dirfd, const struct stat *skip, unsigned budget_ms, struct ckv_scan *s);
#endif
