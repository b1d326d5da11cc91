/* test_kline.c - kernel-log lines parsed once (common/kline.h): /dev/kmsg records, and the OOM
 * killer's lines by their format: a comm (the process's own name, up to 15 bytes of anything)
 * that spells another field cannot forge it. */
#include "kline.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static void records(void)
{
    struct kline_rec r;
    const char *rec = "6,1234,5678901,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1\n SUBSYSTEM=pci\n "
                      "DEVICE=+pci:0000:3b:00.0\n";
    CHECK(
        kline_record(rec, strlen(rec), &r) == 0 && r.fac == 0 && r.lvl == 6 && r.seq == 1234 &&
            r.ts_usec == 5678901 && r.text_len == strlen("NVRM: Xid (PCI:0000:3b:00): 79, pid=1") &&
            !strncmp(r.text, "NVRM: Xid", 9) && r.attrs && !strncmp(r.attrs, " SUBSYSTEM=pci", 14),
        "a record: priority, sequence, time, text, attributes");
    const char *bare = "30,7,8,c;hello";
    CHECK(kline_record(bare, strlen(bare), &r) == 0 && r.fac == 3 && r.lvl == 6 &&
              r.text_len == 5 && !r.attrs,
          "a record without a newline or attributes");
    const char *bad[] = {"no semicolon\n", "6,1\n;text", "x,1,2,-;t", "6,1,2;t", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(kline_record(bad[i], strlen(bad[i]), &r) == -1, "not a record: \"%s\"", bad[i]);
}

static void oom(void)
{
    struct kline_oom o;
    CHECK(
        kline_oom(
            "Memory cgroup out of memory: Killed process 1234 (python3) total-vm:1000kB, "
            "anon-rss:500kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:100kB oom_score_adj:0",
            &o) == 1 &&
            o.kind == KLINE_OOM_KILLED && o.pid == 1234 && o.uid == 1000 &&
            !strcmp(o.comm, "python3") && o.total_vm_kib == 1000 && o.anon_rss_kib == 500 &&
            o.scope_hint == 1,
        "a cgroup's kill: pid, comm, uid, sizes (uid %ld, comm %s)", o.uid, o.comm);
    /* the process named itself to look like another user's kill */
    CHECK(kline_oom("Out of memory: Killed process 4242 (UID:0 x) total-vm:10kB, anon-rss:5kB, "
                    "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:1kB oom_score_adj:0",
                    &o) == 1 &&
              o.pid == 4242 && o.uid == 1000 && !strcmp(o.comm, "UID:0 x") && o.scope_hint == 2,
          "a comm \"UID:0 x\" is the comm, the uid is the kernel's (uid %ld)", o.uid);
    CHECK(kline_oom("Out of memory: Killed process 77 (a) total-vm:9) total-vm:10kB, anon-rss:5kB, "
                    "file-rss:0kB, shmem-rss:0kB, UID:33 pgtables:1kB oom_score_adj:0",
                    &o) == 1 &&
              o.pid == 77 && o.uid == 33 && !strcmp(o.comm, "a) total-vm:9") &&
              o.total_vm_kib == 10,
          "a comm that spells \") total-vm:\" (comm %s, total-vm %.0f)", o.comm, o.total_vm_kib);
    CHECK(kline_oom(
              "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
              "oom_memcg=/slurm/job_1,task_memcg=/slurm/job_1/step_0,task=python,pid=1234,uid=1000",
              &o) == 1 &&
              o.kind == KLINE_OOM_LIST && o.pid == 1234 && o.uid == 1000 &&
              !strcmp(o.comm, "python") && !strcmp(o.constraint, "CONSTRAINT_MEMCG") &&
              !strcmp(o.oom_memcg, "/slurm/job_1") &&
              !strcmp(o.task_memcg, "/slurm/job_1/step_0") && !o.global_oom,
          "the oom-kill: list");
    CHECK(kline_oom("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/"
                    ",mems_allowed=0,global_oom,"
                    "task_memcg=/user.slice,task=a,pid=9,uid=0,pid=1,uid=7",
                    &o) == 1 &&
              o.pid == 1 && o.uid == 7 && !strcmp(o.comm, "a,pid=9,uid=0") && o.global_oom,
          "a comm \"a,pid=9,uid=0\" does not change the kill's pid and uid (pid %ld uid %ld)",
          o.pid, o.uid);
    CHECK(kline_oom("Kill process 55 (java) score 900 or sacrifice child", &o) == 1 &&
              o.kind == KLINE_OOM_KILL && o.pid == 55 && !strcmp(o.comm, "java") && o.uid == -1,
          "the older Kill process line");
    CHECK(kline_oom("Task in /docker/abc killed as a result of limit of /docker", &o) == 1 &&
              o.kind == KLINE_OOM_TASK_IN && !strcmp(o.task_memcg, "/docker/abc") &&
              !strcmp(o.oom_memcg, "/docker"),
          "the older Task in line");
    CHECK(kline_oom("python3 invoked oom-killer: gfp_mask=0x100cca", &o) == 0, "not a kill line");
    CHECK(kline_oom("Killed process abc (x)", &o) == 0, "no pid: not a kill");
}

int main(void)
{
    records();
    oom();
    printf(fails ? "%d check(s) failed\n" : "all checks passed\n", fails);
    return fails != 0;
}
