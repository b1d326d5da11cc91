/* test_evidence.c - the evidence decoders over every real sample in fixtures/ (acceptance 1 of
 * issue 5):
 *   every Xid line of fixtures/kmsg/{kmsg-xid,kernel-lines}.jsonl yields its code and PCI id (checked
 *     against an independent POSIX regex), plus the odd variants' fields (pid '<unknown>', MIG
 *     GPU-I, caused by previous Xid, the fallen-off-the-bus message without an Xid = 79);
 *   every fixtures/nvidia-smi XML file yields per-GPU memory and ECC figures (and the values the file
 *     has), and hostile XML (billion laughs, external entity, truncated, not XML, UTF-16 entities,
 *     oversized) gives a clear error;
 *   every message of fixtures/logs/error-messages.jsonl is recognized with the right category
 *     (mapping below), the fields are extracted, and ordinary lines are not flagged.
 * Run from the build tree: CP_SRC points at the source tree (CMake sets it).
 */
#include "bundlew.h"
#include "evidence.h"
#include "render.h"
#include "gpu_smi.h"
#include "logerr.h"
#include "xid.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails, checks;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            fails++;                                                                               \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static const char *src;

static char *slurp(const char *rel, size_t *len)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", src, rel);
    FILE *f = fopen(p, "rb");
    if (!f) {
        fprintf(stderr, "FATAL: cannot open %s\n", p);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
        exit(1);
    b[n] = 0;
    fclose(f);
    if (len)
        *len = (size_t)n;
    return b;
}

/* Calls fn on every JSON object line of a .jsonl fixture. */
static void each_jsonl(const char *rel, void (*fn)(const cJSON *, void *), void *arg)
{
    char *b = slurp(rel, NULL);
    char *save = NULL;
    for (char *l = strtok_r(b, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        if (!j) {
            fprintf(stderr, "FATAL: %s: bad JSON line\n", rel);
            exit(1);
        }
        fn(j, arg);
        cJSON_Delete(j);
    }
    free(b);
}

/* ---- Xid ---- */

static regex_t xid_rx; /* the reference's recommended header regex, as an independent oracle */
static int xid_lines, bus_events;
static struct kline_xid_ctx ctx;

static void check_xid_line(const char *line)
{
    regmatch_t m[5];
    struct kline_xid ev;
    int got = kline_xid_parse(&ctx, line, &ev);
    if (regexec(&xid_rx, line, 5, m, 0) == 0) {
        xid_lines++;
        int code = atoi(line + m[4].rm_so);
        char raw[64], want[32];
        size_t l = (size_t)(m[2].rm_eo - m[2].rm_so);
        snprintf(raw, sizeof(raw), "%.*s", (int)l, line + m[2].rm_so);
        CHECK(kline_pci_normalize(raw, want, sizeof(want)) == 0, "oracle pci %s", raw);
        CHECK(got == 1, "not parsed: %s", line);
        CHECK(ev.code == code, "code %d, want %d: %s", ev.code, code, line);
        CHECK(!strcmp(ev.pci, want), "pci %s, want %s: %s", ev.pci, want, line);
        CHECK(!ev.implied, "explicit Xid marked implied: %s", line);
        CHECK(ev.text[0] != 0, "no message text: %s", line);
    } else if (got) {
        bus_events++;
        CHECK(ev.code == 79 && ev.implied && strstr(line, "fallen off the bus"),
              "non-Xid line parsed as Xid %d: %s", ev.code, line);
        CHECK(ev.pci[0] != 0, "bus message without a PCI id: %s", line);
    }
}

static void xid_fixture(const cJSON *j, void *arg)
{
    (void)arg;
    const cJSON *lines = cJSON_GetObjectItem(j, "lines"), *l;
    if (lines) {
        memset(&ctx, 0, sizeof(ctx));
        cJSON_ArrayForEach(l, lines) check_xid_line(l->valuestring);
    } else {
        const cJSON *line = cJSON_GetObjectItem(j, "line");
        if (cJSON_IsString(line))
            check_xid_line(line->valuestring);
    }
}

static void test_xid(void)
{
    /* groups: 2 = pci, 4 = code */
    if (regcomp(&xid_rx, "NVRM: Xid \\((PCI:)?([0-9A-Fa-f:.]+)( GPU-I:[0-9]+)?[^)]*\\): ([0-9]+)",
                REG_EXTENDED))
        exit(1);
    each_jsonl("fixtures/kmsg/kmsg-xid.jsonl", xid_fixture, NULL);
    each_jsonl("fixtures/kmsg/kernel-lines.jsonl", xid_fixture, NULL);
    regfree(&xid_rx);
    CHECK(xid_lines >= 25, "only %d Xid lines in the fixtures", xid_lines);
    /* the single-line and the three-line bus messages (kmsg-xid.jsonl) */
    CHECK(bus_events == 2, "%d fallen-off-the-bus events without an Xid, want 2", bus_events);

    struct kline_xid ev;
    struct kline_xid_ctx c;
    memset(&c, 0, sizeof(c));
    CHECK(kline_xid_parse(&c,
                    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', "
                    "name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal "
                    "Instruction Parameter",
                    &ev) == 1 &&
              ev.code == 13 && ev.pid_unknown && !ev.has_pid && !ev.name[0] &&
              !strcmp(ev.pci, "0000:cb:00.0") &&
              !strncmp(ev.text, "Graphics SM Warp Exception", 26),
          "pid '<unknown>' variant: code %d pid_unknown %d name '%s' text '%s'", ev.code,
          ev.pid_unknown, ev.name, ev.text);
    CHECK(kline_xid_parse(&c, "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User "
                        "Channel (0x9). RST: No, D-RST: No",
                    &ev) == 1 &&
              ev.code == 94 && ev.gpu_instance == 5 && ev.has_pid && ev.pid == 7194 &&
              !strcmp(ev.pci, "0000:01:00.0") && !strncmp(ev.text, "Contained:", 10),
          "MIG variant: code %d gi %d pid %ld pci %s", ev.code, ev.gpu_instance, ev.pid, ev.pci);
    CHECK(kline_xid_parse(&c, "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch "
                        "00000001 caused by previous Xid 149",
                    &ev) == 1 &&
              ev.code == 45 && ev.caused_by == 149 && ev.pid == 1818990 &&
              !strcmp(ev.name, "python3"),
          "caused-by variant: code %d caused_by %d name %s", ev.code, ev.caused_by, ev.name);
    CHECK(kline_xid_parse(&c, "NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff",
                    &ev) == 1 &&
              ev.code == 3 && !ev.has_pid && !strcmp(ev.pci, "0000:01:00.0"),
          "no PCI: prefix variant");
    CHECK(kline_xid_parse(&c, "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406)",
                    &ev) == 1 &&
              ev.code == 149 && !strcmp(ev.pci, "0019:01:00.0"),
          "non-zero PCI domain: %s", ev.pci);
    /* three separate records of the bus message */
    memset(&c, 0, sizeof(c));
    CHECK(kline_xid_parse(&c, "NVRM: The NVIDIA GPU 0000:b3:00.0", &ev) == 0, "first line alone");
    CHECK(kline_xid_parse(&c, "NVRM: (PCI ID: 10de:26b5) installed in this system has", &ev) == 0,
          "second line alone");
    CHECK(kline_xid_parse(&c, "NVRM: fallen off the bus and is not responding to commands.", &ev) == 1 &&
              ev.code == 79 && ev.implied && !strcmp(ev.pci, "0000:b3:00.0"),
          "three-record bus message: code %d pci %s", ev.code, ev.pci);
    /* one record with the newlines inside (how /dev/kmsg delivers it) */
    memset(&c, 0, sizeof(c));
    CHECK(kline_xid_parse(&c, "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed "
                        "in this system has\nNVRM: fallen off the bus and is not responding to "
                        "commands.",
                    &ev) == 1 &&
              ev.code == 79 && !strcmp(ev.pci, "0000:b3:00.0"),
          "one-record bus message");
    /* not Xids */
    CHECK(kline_xid_parse(&c, "NVRM: GPU at PCI:0000:01:00: GPU-af4f89ae-d08b-1b53-9938-c9ed209a3513",
                    &ev) == 0,
          "GPU-at line is not an Xid");
    CHECK(kline_xid_parse(&c, "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal", &ev) == 0,
          "SXid is not an Xid");
    CHECK(kline_xid_parse(&c, "NVRM: Xid (PCI:0000:01:00): , garbage", &ev) == 0, "no code");
    CHECK(kline_xid_parse(&c, "NVRM: Xid (PCI:0000:01:00): 99999999999, x", &ev) == 0, "huge code");
    char big[3000];
    memset(big, 'A', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    memcpy(big, "NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=", 45);
    CHECK(kline_xid_parse(&c, big, &ev) == 1 && strlen(ev.name) < sizeof(ev.name), "long name cut");

    char n[32];
    CHECK(kline_pci_normalize("00000000:3B:00.0", n, sizeof(n)) == 0 && !strcmp(n, "0000:3b:00.0"),
          "nvidia-smi form: %s", n);
    CHECK(kline_pci_normalize("0000:3b:00", n, sizeof(n)) == 0 && !strcmp(n, "0000:3b:00.0"),
          "Xid form: %s", n);
    CHECK(kline_pci_normalize("3b:00.1", n, sizeof(n)) == 0 && !strcmp(n, "0000:3b:00.1"),
          "short form: %s", n);
    CHECK(kline_pci_normalize("zz:00.0", n, sizeof(n)) == -1 && !n[0], "garbage pci");

    /* the catalogue covers the codes */
    char err[512];
    cJSON *cat = xid_catalog_load(err, sizeof(err));
    CHECK(cat != NULL, "catalogue: %s", err);
    static const int need[] = {13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79,
                               92, 94, 95, 109, 119, 120, 121, 140, 143, 154};
    static const char *const blames[] = {"application", "driver", "hardware", "thermal",
                                         "bus", "nvlink", "unknown"};
    static const char *const actions[] = {"restart_app", "reset_gpu", "reboot",
                                          "drain", "rma", "none"};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        const cJSON *e = xid_catalog_entry(cat, need[i]);
        CHECK(e && cJSON_IsString(cJSON_GetObjectItem(e, "meaning")), "Xid %d not catalogued",
              need[i]);
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(cat, "xids"))
    {
        const char *b = cJSON_GetStringValue(cJSON_GetObjectItem(e, "blame"));
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(e, "action"));
        int okb = 0, oka = 0;
        for (size_t i = 0; b && i < 7; i++)
            okb |= !strcmp(b, blames[i]);
        for (size_t i = 0; a && i < 6; i++)
            oka |= !strcmp(a, actions[i]);
        CHECK(okb && oka, "Xid %s: blame %s / action %s not in the contract", e->string,
              b ? b : "-", a ? a : "-");
    }
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(xid_catalog_entry(cat, 79), "blame")),
                  "bus"),
          "Xid 79 blame");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(xid_catalog_entry(cat, 48), "blame")),
                  "hardware"),
          "Xid 48 blame");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(xid_catalog_entry(cat, 31), "blame")),
                  "application"),
          "Xid 31 blame");
    CHECK(xid_catalog_entry(cat, 4242) == NULL, "unknown code");
    cJSON_Delete(cat);
}

/* ---- nvidia-smi ---- */

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int has_str(const cJSON *arr, const char *s)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if (cJSON_IsString(e) && !strcmp(e->valuestring, s)) return 1;
    return 0;
}

static cJSON *smi_file(const char *name)
{
    char rel[256], err[512] = "";
    snprintf(rel, sizeof(rel), "fixtures/nvidia-smi/%s", name);
    size_t len;
    char *x = slurp(rel, &len);
    cJSON *o = gpu_smi_parse(x, len, err, sizeof(err));
    free(x);
    CHECK(o != NULL, "%s: %s", name, err);
    if (!o)
        return NULL;
    const cJSON *g, *gpus = cJSON_GetObjectItem(o, "gpus");
    CHECK(cJSON_GetArraySize(gpus) >= 1, "%s: no GPU", name);
    CHECK(cJSON_IsString(cJSON_GetObjectItem(o, "driver_version")), "%s: driver_version", name);
    cJSON_ArrayForEach(g, gpus)
    {
        CHECK(num(g, "memory_used_mib") >= 0 && num(g, "memory_total_mib") > 0,
              "%s: memory figures", name);
        CHECK(num(g, "memory_used_pct") >= 0, "%s: memory_used_pct", name);
        const cJSON *ecc = cJSON_GetObjectItem(g, "ecc");
        static const char *const k[] = {"volatile_sbe", "volatile_dbe", "aggregate_sbe",
                                        "aggregate_dbe"};
        for (int i = 0; i < 4; i++) {
            const cJSON *v = cJSON_GetObjectItem(ecc, k[i]);
            CHECK(cJSON_IsNumber(v) || cJSON_IsNull(v), "%s: ecc.%s missing", name, k[i]);
        }
        CHECK(cJSON_IsString(cJSON_GetObjectItem(g, "pci")), "%s: pci", name);
        CHECK(cJSON_IsArray(cJSON_GetObjectItem(g, "throttle_reasons")), "%s: throttle", name);
        CHECK(cJSON_IsObject(cJSON_GetObjectItem(g, "remapped_rows")) &&
                  cJSON_IsObject(cJSON_GetObjectItem(g, "retired_pages")),
              "%s: remapped_rows / retired_pages", name);
    }
    return o;
}

static const cJSON *gpu0(const cJSON *o)
{
    return cJSON_GetArrayItem(cJSON_GetObjectItem(o, "gpus"), 0);
}

static void smi_err(const char *what, const char *xml, size_t len, const char *want)
{
    char err[512] = "";
    cJSON *o = gpu_smi_parse(xml, len, err, sizeof(err));
    CHECK(o == NULL, "%s: parsed", what);
    CHECK(strstr(err, want) != NULL, "%s: error '%s', want '%s'", what, err, want);
    cJSON_Delete(o);
}

static void test_smi(void)
{
    cJSON *a = smi_file("a100-sxm4-80gb-driver535.xml");
    const cJSON *g = gpu0(a), *ecc = cJSON_GetObjectItem(g, "ecc");
    CHECK(num(g, "memory_total_mib") == 81920 && num(g, "memory_used_mib") == 50,
          "a100 memory %g/%g", num(g, "memory_used_mib"), num(g, "memory_total_mib"));
    CHECK(num(ecc, "volatile_dbe") == 0 && num(ecc, "aggregate_sbe") == 0, "a100 ecc");
    CHECK(num(g, "temperature_c") == 27 && fabs(num(g, "power_w") - 67.03) < 1e-9,
          "a100 temp %g power %g", num(g, "temperature_c"), num(g, "power_w"));
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a, "driver_version")), "535.54.03"),
          "a100 driver");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(g, "pci")), "0000:00:04.0") ||
              cJSON_IsString(cJSON_GetObjectItem(g, "pci")),
          "a100 pci");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "remapped_rows"), "pending")),
          "a100 remapped_rows N/A -> null");
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(g, "throttle_reasons")) == 0, "a100 no throttle");
    cJSON_Delete(a);

    cJSON *t = smi_file("t4-driver515.xml");
    g = gpu0(t);
    const cJSON *procs = cJSON_GetObjectItem(g, "processes"), *p;
    int py = 0;
    cJSON_ArrayForEach(p, procs) if (num(p, "pid") == 5762 && num(p, "used_mib") == 1005 &&
                                     !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p, "name")),
                                             "python")) py = 1;
    CHECK(py, "t4: the python compute process with its memory");
    CHECK(num(g, "memory_used_mib") == 1032 && num(g, "memory_total_mib") == 15360, "t4 memory");
    CHECK(num(cJSON_GetObjectItem(g, "retired_pages"), "dbe") == 0 &&
              cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "retired_pages"),
                                                "pending")),
          "t4 retired pages (old element names)");
    CHECK(fabs(num(g, "power_w") - 26.78) < 1e-9, "t4 power_readings/power_draw");
    cJSON_Delete(t);

    cJSON *q = smi_file("quadro-p400-driver418.xml");
    g = gpu0(q);
    CHECK(has_str(cJSON_GetObjectItem(g, "throttle_reasons"), "gpu_idle"),
          "quadro: clocks_throttle_reason_gpu_idle Active");
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "ecc"), "volatile_dbe")),
          "quadro: ECC N/A -> null");
    CHECK(num(g, "memory_total_mib") == 1998, "quadro memory");
    cJSON_Delete(q);

    cJSON *r = smi_file("rtx3080-driver595.xml");
    g = gpu0(r);
    CHECK(num(g, "memory_used_mib") == 9184 && num(g, "memory_total_mib") == 10240,
          "rtx3080 memory");
    CHECK(fabs(num(g, "power_w") - 142.33) < 1e-9, "rtx3080 instant_power_draw: %g",
          num(g, "power_w"));
    cJSON_Delete(r);

    /* a GPU with a DBE and row remapping pending, in the v12 element names */
    static const char dbe[] =
        "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n"
        "<nvidia_smi_log><driver_version>535.54.03</driver_version><gpu id=\"00000000:3B:00.0\">"
        "<product_name>NVIDIA A100</product_name><fb_memory_usage><total>81920 MiB</total>"
        "<used>80000 MiB</used></fb_memory_usage><ecc_errors><volatile><sram_correctable>1"
        "</sram_correctable><sram_uncorrectable>0</sram_uncorrectable><dram_correctable>2"
        "</dram_correctable><dram_uncorrectable>3</dram_uncorrectable></volatile><aggregate>"
        "<dram_uncorrectable>5</dram_uncorrectable></aggregate></ecc_errors><remapped_rows>"
        "<remapped_row_corr>0</remapped_row_corr><remapped_row_unc>4</remapped_row_unc>"
        "<remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No"
        "</remapped_row_failure></remapped_rows><clocks_event_reasons>"
        "<clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>"
        "</clocks_event_reasons></gpu></nvidia_smi_log>\n";
    char err[512];
    cJSON *d = gpu_smi_parse(dbe, sizeof(dbe) - 1, err, sizeof(err));
    CHECK(d != NULL, "dbe sample: %s", err);
    g = gpu0(d);
    ecc = cJSON_GetObjectItem(g, "ecc");
    const cJSON *rr = cJSON_GetObjectItem(g, "remapped_rows");
    CHECK(num(ecc, "volatile_sbe") == 3 && num(ecc, "volatile_dbe") == 3 &&
              num(ecc, "aggregate_dbe") == 5,
          "dbe sums: %g %g %g", num(ecc, "volatile_sbe"), num(ecc, "volatile_dbe"),
          num(ecc, "aggregate_dbe"));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(rr, "pending")) &&
              cJSON_IsFalse(cJSON_GetObjectItem(rr, "failure")) && num(rr, "uncorrectable") == 4,
          "remapped rows");
    CHECK(has_str(cJSON_GetObjectItem(g, "throttle_reasons"), "hw_thermal_slowdown"), "thermal");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(g, "pci")), "0000:3b:00.0"), "pci");
    CHECK(fabs(num(g, "memory_used_pct") - 97.7) < 0.05, "pct %g", num(g, "memory_used_pct"));
    cJSON_Delete(d);

    /* hostile and broken input */
    static const char laughs[] =
        "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY a \"aaaaaaaaaa\">\n"
        "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">\n<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">\n"
        "<!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">\n<!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">\n"
        "<!ENTITY f \"&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;\">\n<!ENTITY g \"&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;\">\n"
        "<!ENTITY h \"&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;\">\n<!ENTITY i \"&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;\">\n"
        "]>\n<nvidia_smi_log><driver_version>&i;</driver_version></nvidia_smi_log>\n";
    smi_err("billion laughs", laughs, sizeof(laughs) - 1, "refused");
    static const char xxe[] =
        "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "
        "\"file:///etc/passwd\">]>\n<nvidia_smi_log><driver_version>&x;</driver_version>"
        "</nvidia_smi_log>\n";
    smi_err("external entity", xxe, sizeof(xxe) - 1, "refused");
    /* the same declarations in UTF-16: the byte scan cannot see them, the parsed DTD can */
    static const char *const u16src[] = {laughs, xxe};
    for (int k = 0; k < 2; k++) {
        const char *x = u16src[k];
        size_t xl = strlen(x);
        /* with an encoding declaration that agrees with the BOM */
        char *x2 = malloc(xl + 64);
        snprintf(x2, xl + 64, "<?xml version=\"1.0\" encoding=\"UTF-16\"?>%s", strstr(x, "?>") + 2);
        xl = strlen(x2);
        size_t ul = xl * 2 + 2;
        char *u16 = malloc(ul);
        u16[0] = (char)0xff;
        u16[1] = (char)0xfe;
        for (size_t i = 0; i < xl; i++) {
            u16[2 + 2 * i] = x2[i];
            u16[3 + 2 * i] = 0;
        }
        char e2[512] = "";
        cJSON *o = gpu_smi_parse(u16, ul, e2, sizeof(e2));
        CHECK(o == NULL && (strstr(e2, "refused") || strstr(e2, "not XML")), "UTF-16 %s: %s",
              k ? "external entity" : "billion laughs", o ? "parsed" : e2);
        printf("UTF-16 %s: %s\n", k ? "external entity" : "billion laughs", e2);
        cJSON_Delete(o);
        free(u16);
        free(x2);
    }
    size_t alen;
    char *a100 = slurp("fixtures/nvidia-smi/a100-sxm4-80gb-driver535.xml", &alen);
    smi_err("truncated", a100, alen / 2, "not XML");
    free(a100);
    static const char nvml[] = "Failed to initialize NVML: Driver/library version mismatch\n";
    smi_err("NVML error text", nvml, sizeof(nvml) - 1, "not XML");
    smi_err("empty", "", 0, "empty");
    static const char other[] = "<?xml version=\"1.0\"?><html><body/></html>";
    smi_err("other root", other, sizeof(other) - 1, "root element <html>");
    smi_err("oversized", nvml, (size_t)GPU_SMI_MAX + 1, "over the");
}

/* ---- log errors ---- */

static const char *const catmap[][2] = {
    {"cuda_oom", "cuda_oom"},
    {"illegal_memory_access", "illegal_memory_access"},
    {"c10_error_abort", "c10_error"},
    {"device_assert", "device_assert"},
    {"cublas", "cublas"},
    {"cudnn", "cudnn"},
    {"unspecified_launch_failure", "cuda_error"},
    {"xid", "xid"},
    {"nccl_cuda_error", "nccl_error"},
    {"device_unavailable", "cuda_error"},
    {"ecc_error", "cuda_error"},
    {"nvlink_error", "cuda_error"},
    {"nccl_timeout", "nccl_timeout"},
    {"nccl_async_abort", "nccl_error"},
    {"nccl_system_error", "nccl_error"},
    {"nccl_remote_error", "nccl_error"},
    {"nccl_ib", "nccl_error"},
    {"dataloader_killed", "dataloader_killed"},
    {"dataloader_segfault", "dataloader_killed"},
    {"dataloader_shm", "dataloader_killed"},
    {"dataloader_exited", "dataloader_killed"},
    {"elastic_child_failed", "child_failed"},
    {"nan_inf", "nan_inf"},
    {"driver_mismatch", "driver_mismatch"},
    {"arch_mismatch", "driver_mismatch"},
    {"host_oom", "host_oom"},
    {"hung_task", "hung_task"},
    {"peermem", "peermem"},
    {"host_memory_error", "host_memory_error"},
    {"gpu_reset_required", "gpu_reset_required"},
};

static struct logerr_set *pats;
static int nmsgs;

static const cJSON *find_cat(const cJSON *errs, const char *cat)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, errs) if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "category")),
                                            cat)) return e;
    return NULL;
}

static void msg_fixture(const cJSON *j, void *arg)
{
    (void)arg;
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(j, "message"));
    const char *fc = cJSON_GetStringValue(cJSON_GetObjectItem(j, "category"));
    const char *want = NULL;
    for (size_t i = 0; i < sizeof(catmap) / sizeof(catmap[0]); i++)
        if (!strcmp(catmap[i][0], fc))
            want = catmap[i][1];
    CHECK(want != NULL, "fixture category %s has no mapping", fc);
    if (!want)
        return;
    nmsgs++;
    cJSON *errs = cJSON_CreateArray();
    size_t n = logerr_scan(pats, msg, strlen(msg), "logs/stderr.tail", errs, 50);
    CHECK(n >= 1 && find_cat(errs, want), "%s (want %s, first got %s): %.120s", fc, want,
          n ? cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(errs, 0), "category"))
            : "nothing",
          msg);
    cJSON_Delete(errs);
}

static const cJSON *scan1(const char *text, cJSON *errs)
{
    logerr_scan(pats, text, strlen(text), "logs/stderr.tail", errs, 50);
    return cJSON_GetArrayItem(errs, 0);
}

static void test_logs(void)
{
    char err[512];
    pats = logerr_load(err, sizeof(err));
    CHECK(pats != NULL, "patterns: %s", err);
    if (!pats)
        return;
    each_jsonl("fixtures/logs/error-messages.jsonl", msg_fixture, NULL);
    CHECK(nmsgs >= 70, "only %d messages checked", nmsgs);

    /* fields */
    cJSON *errs = cJSON_CreateArray();
    const cJSON *e = scan1(
        "step 10\nRuntimeError: CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB "
        "total capacity; 781.59 MiB already allocated; 3.03 GiB free; 1.24 GiB reserved in total by "
        "PyTorch)\n",
        errs);
    const cJSON *f = cJSON_GetObjectItem(e, "fields");
    CHECK(num(e, "line") == 2, "line number %g", num(e, "line"));
    CHECK(fabs(num(f, "tried_mib") - 2314.24) < 0.01 && num(f, "total_mib") == 6144 &&
              fabs(num(f, "free_mib") - 3102.72) < 0.01 && num(f, "gpu") == 0,
          "oom 1.x fields: tried %g total %g free %g", num(f, "tried_mib"), num(f, "total_mib"),
          num(f, "free_mib"));
    cJSON_Delete(errs);
    errs = cJSON_CreateArray();
    e = scan1("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a "
              "total capacity of 31.47 GiB of which 12.73 GiB is free. Including non-PyTorch",
              errs);
    f = cJSON_GetObjectItem(e, "fields");
    CHECK(fabs(num(f, "tried_mib") - 23326.72) < 0.01 && fabs(num(f, "total_mib") - 32225.28) < 0.01 &&
              fabs(num(f, "free_mib") - 13035.52) < 0.01,
          "oom 2.x fields: tried %g total %g free %g", num(f, "tried_mib"), num(f, "total_mib"),
          num(f, "free_mib"));
    cJSON_Delete(errs);
    errs = cJSON_CreateArray();
    e = scan1("[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
              "collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, "
              "NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600061 "
              "milliseconds before timing out.",
              errs);
    f = cJSON_GetObjectItem(e, "fields");
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "category")), "nccl_timeout") &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(f, "op")), "_REDUCE_SCATTER_BASE") &&
              num(f, "seq") == 7753 && num(f, "timeout_ms") == 600000 && num(f, "rank") == 0 &&
              num(f, "ran_ms") == 600061,
          "nccl fields");
    cJSON_Delete(errs);
    errs = cJSON_CreateArray();
    e = scan1("RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed. ", errs);
    f = cJSON_GetObjectItem(e, "fields");
    CHECK(num(f, "worker_pid") == 19597 &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(f, "signal")), "Killed"),
          "dataloader fields");
    cJSON_Delete(errs);
    /* the ECC error inside a NCCL watchdog line is an ECC error, not a timeout */
    errs = cJSON_CreateArray();
    e = scan1("[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: "
              "CUDA error: uncorrectable ECC error encountered",
              errs);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "kind")), "ecc_uncorrectable"),
          "ecc in watchdog line");
    cJSON_Delete(errs);

    /* ordinary lines are not errors */
    static const char normal[] =
        "Epoch 1/10: loss=0.4312 acc=0.88\n"
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
        "Using device: cuda:0 (NVIDIA A100-SXM4-80GB)\n"
        "Saving checkpoint to /ckpt/step_1000.pt\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group\n"
        "warning: no error here, memory 12.00 GiB free\n";
    errs = cJSON_CreateArray();
    size_t n = logerr_scan(pats, normal, sizeof(normal) - 1, "logs/stdout.tail", errs, 50);
    CHECK(n == 0, "ordinary lines flagged: %s",
          n ? cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(errs, 0), "text")) : "");
    cJSON_Delete(errs);
    /* hostile: invalid UTF-8, NULs, a huge line, CR-only */
    char *h = malloc(200000);
    memset(h, 'x', 200000);
    memcpy(h, "\xff\xfe CUDA error: an illegal memory access was encountered\0\x01", 58);
    h[100000] = '\n';
    static const char tail[] = "\r\n\r\nRuntimeError: CUDA error: device-side assert triggered\n";
    memcpy(h + 100001, tail, sizeof(tail) - 1);
    errs = cJSON_CreateArray();
    n = logerr_scan(pats, h, 200000, "logs/stderr.tail", errs, 50);
    CHECK(n == 2 && find_cat(errs, "illegal_memory_access") && find_cat(errs, "device_assert"),
          "hostile tail: %zu: %s / %s", n,
          cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(errs, 0), "category")),
          cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(errs, 1), "category")));
    const char *txt = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(errs, 0), "text"));
    CHECK(txt && strlen(txt) <= LOGERR_TEXT_MAX && !strncmp(txt, "\xEF\xBF\xBD", 3),
          "text cut and cleaned");
    cJSON_Delete(errs);
    free(h);
    /* the cleaner: short strings, exact fits, cuts on a character boundary */
    char cb[8];
    logerr_clean_utf8(cb, 2, "0", 1, 0);
    CHECK(!strcmp(cb, "0"), "one char in 2 bytes: '%s'", cb);
    logerr_clean_utf8(cb, 4, "a\nb", 3, 1);
    CHECK(!strcmp(cb, "a\nb"), "newline kept");
    logerr_clean_utf8(cb, 4, "a\nb", 3, 0);
    CHECK(!strcmp(cb, "a b"), "newline replaced");
    logerr_clean_utf8(cb, 4, "a\xc3\xa9x", 4, 0);
    CHECK(!strcmp(cb, "a\xc3\xa9"), "cut after the 2-byte character: '%s'", cb);
    logerr_clean_utf8(cb, 3, "a\xc3\xa9", 3, 0);
    CHECK(!strcmp(cb, "a"), "no half character: '%s'", cb);
    logerr_clean_utf8(cb, 8, "\xff", 1, 0);
    CHECK(!strcmp(cb, "\xEF\xBF\xBD"), "invalid byte replaced");
    /* the max cap */
    char many[4000] = "";
    for (int i = 0; i < 50; i++)
        strcat(many, "RuntimeError: CUDA error: unspecified launch failure\n");
    errs = cJSON_CreateArray();
    n = logerr_scan(pats, many, strlen(many), "x", errs, 10);
    CHECK(n == 50 && cJSON_GetArraySize(errs) == 10, "cap: %zu found, %d kept", n,
          cJSON_GetArraySize(errs));
    cJSON_Delete(errs);
    /* a broken pattern file is an error, not a crash */
    struct logerr_set *bad = logerr_load_json("{\"patterns\":[{\"id\":\"x\",\"category\":\"c\","
                                              "\"regex\":\"(unclosed\"}]}",
                                              60, err, sizeof(err));
    CHECK(bad == NULL && strstr(err, "bad regex"), "bad regex: %s", err);
    bad = logerr_load_json("[]", 2, err, sizeof(err));
    CHECK(bad == NULL, "not a pattern file");
    logerr_free(pats);
}

/* ---- evidence_add over bundles with hostile members ---- */

struct mem {
    const char *name, *data;
    size_t len; /* 0: strlen */
};

static struct bundle *make_bundle(const struct mem *m, size_t n)
{
    char path[] = "/tmp/test_evidence.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        exit(1);
    unlink(path);
    struct bw w;
    if (bw_init(&w, fd, 1, 0))
        exit(1);
    for (size_t i = 0; i < n; i++)
        if (bw_add(&w, m[i].name, m[i].data, m[i].len ? m[i].len : strlen(m[i].data)))
            exit(1);
    if (bw_finish(&w))
        exit(1);
    bw_free(&w);
    struct bundle *b = NULL;
    char err[256];
    if (bundle_open_fd(fd, &b, err, sizeof(err))) {
        fprintf(stderr, "FATAL: %s\n", err);
        exit(1);
    }
    close(fd);
    return b;
}

static cJSON *run_evidence(const struct mem *m, size_t n)
{
    struct bundle *b = make_bundle(m, n);
    cJSON *r = cJSON_Parse("{\"process\":{\"pid\":42},\"gpu\":{\"xid\":[],\"nvidia_smi\":null},"
                           "\"log\":{\"errors\":[]},\"checkpoint\":{}}");
    char err[512] = "";
    CHECK(evidence_add(r, b, err, sizeof(err)) == 0, "evidence_add: %s", err);
    bundle_close(b);
    /* the report prints as JSON and every string in it is valid UTF-8 */
    char *s = cJSON_PrintUnformatted(r);
    CHECK(s != NULL, "report prints");
    for (const unsigned char *p = (const unsigned char *)s; s && *p; p++)
        if (*p >= 0x80) {
            size_t k = (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2 : (*p & 0xF8) == 0xF0 ? 3 : 9;
            int okseq = k < 4;
            for (size_t j = 1; okseq && j <= k; j++)
                okseq = (p[j] & 0xC0) == 0x80;
            CHECK(okseq, "invalid UTF-8 in the report at offset %ld", (long)(p - (const unsigned char *)s));
            if (!okseq)
                break;
            p += k;
        }
    free(s);
    /* the text section prints too */
    FILE *devnull = fopen("/dev/null", "w");
    render_text(devnull, r, 0);
    fclose(devnull);
    return r;
}

static const cJSON *at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItem(o, a);
    return b ? cJSON_GetObjectItem(x, b) : x;
}

static void test_bundles(void)
{
    static const char kmsg[] =
        "{\"lines\":[1,{\"text\":5},"
        "{\"text\":\"NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\",\"time\":\"bad\"},"
        "{\"text\":\"\xff\xc3 NVRM: Xid (PCI:zz): 13, pid=42, x\",\"time\":1700000000.5,"
        "\"class\":\"xid\",\"source\":\"kern.log\"},"
        "{\"text\":\"NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\",\"time\":1700000001}]}";
    static const char garbage[] = "\xff\xfe\x00\x01 random \x80\x80\n\n\x1b[31mRuntimeError\x1b[0m";
    const struct mem m1[] = {
        {"kmsg.json", kmsg, 0},
        {"gpu.json", "{\"gpus\":\"no\",\"process_devices\":3}", 0},
        {"nvidia-smi.json", "{\"status\":5,\"reason\":\"\\u00e9\"}", 0},
        {"checkpoint.json", "[]", 0},
        {"checkpoint-verdict.json", "{\"path\":7,\"verdict\":{},\"newest_valid\":\"x\",\"size\":\"9\"}", 0},
        {"proc/environ.json",
         "{\"values\":{\"A\":1,\"B\":\"ok\",\"\\u00e9\":\"v\",\"C\":\"\xff\"},\"names_only\":[3,\"D\"]}", 0},
        {"logs/stderr.tail", garbage, sizeof(garbage) - 1},
        {"logs/stdout.tail", "x\nRuntimeError: CUDA error: an illegal memory access was encountered\n", 0},
        {"ml/torchelastic_error.json",
         "{\"message\": {\"message\": \"RuntimeError: DataLoader worker (pid 77) is killed by signal: "
         "Killed.\", \"extraInfo\": {}}}",
         0},
    };
    cJSON *r = run_evidence(m1, sizeof(m1) / sizeof(m1[0]));
    const cJSON *xs = at(r, "gpu", "xid");
    CHECK(cJSON_GetArraySize(xs) == 2, "hostile kmsg.json: %d Xids (want 79 without time, 13 without pci; the implied 79 folded)",
          cJSON_GetArraySize(xs));
    const cJSON *x0 = cJSON_GetArrayItem(xs, 0), *x1 = cJSON_GetArrayItem(xs, 1);
    CHECK(num(x0, "code") == 79 && cJSON_IsNull(cJSON_GetObjectItem(x0, "time")) &&
              cJSON_IsNull(cJSON_GetObjectItem(x0, "own_gpu")),
          "Xid 79 without a time first, own_gpu unknown");
    CHECK(num(x1, "code") == 13 && cJSON_IsNull(cJSON_GetObjectItem(x1, "pci")) &&
              cJSON_IsTrue(cJSON_GetObjectItem(x1, "own_pid")) &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x1, "source")), "kern.log"),
          "Xid 13 without a pci, own pid, from kern.log");
    CHECK(cJSON_GetArraySize(at(r, "kernel_log", "lines")) == 3, "kernel_log.lines: the 3 text lines");
    CHECK(cJSON_IsNull(at(r, "gpu", "nvidia_smi")) &&
              cJSON_IsString(at(r, "gpu", "nvidia_smi_error")),
          "nvidia-smi.json with bad types -> null + error");
    CHECK(cJSON_IsNull(at(r, "checkpoint", "path")) && cJSON_IsNull(at(r, "checkpoint", "valid")) &&
              cJSON_IsString(at(r, "checkpoint", "verdict_from")),
          "checkpoint verdict with bad types");
    const cJSON *env = at(r, "process", "env");
    CHECK(cJSON_GetArraySize(env) == 3 &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(env, "C")), "\xEF\xBF\xBD") && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(env, "B")), "ok") &&
              cJSON_GetObjectItem(env, "A") == NULL,
          "env: strings only (%d)", cJSON_GetArraySize(env));
    const cJSON *errs = at(r, "log", "errors");
    CHECK(cJSON_GetArraySize(errs) == 2 && find_cat(errs, "illegal_memory_access") &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(find_cat(errs, "dataloader_killed"),
                                                               "source")),
                      "ml/torchelastic_error.json") &&
              num(cJSON_GetArrayItem(errs, 0), "line") == 2 &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(errs, 0), "source")),
                      "logs/stdout.tail"),
          "log errors from both tails: %d", cJSON_GetArraySize(errs));
    cJSON_Delete(r);

    /* nothing at all: every key present, empty */
    const struct mem m2[] = {{"manifest.json", "{}", 0}};
    r = run_evidence(m2, 1);
    CHECK(cJSON_IsArray(at(r, "gpu", "xid")) && cJSON_GetArraySize(at(r, "gpu", "xid")) == 0 &&
              cJSON_IsNull(at(r, "gpu", "nvidia_smi")) &&
              strstr(cJSON_GetStringValue(at(r, "gpu", "nvidia_smi_error")), "absent") &&
              cJSON_IsArray(at(r, "kernel_log", "lines")) && cJSON_IsArray(at(r, "log", "errors")) &&
              cJSON_IsNull(at(r, "checkpoint", "path")) && cJSON_IsObject(at(r, "process", "env")),
          "empty bundle: all keys, empty values");
    cJSON_Delete(r);

    /* hostile XML in the bundle */
    static const char laughs[] =
        "<?xml version=\"1.0\"?><!DOCTYPE n [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]>"
        "<nvidia_smi_log><driver_version>&b;</driver_version></nvidia_smi_log>";
    const struct mem m3[] = {{"nvidia-smi.xml", laughs, 0}};
    r = run_evidence(m3, 1);
    CHECK(cJSON_IsNull(at(r, "gpu", "nvidia_smi")) &&
              !strncmp(cJSON_GetStringValue(at(r, "gpu", "nvidia_smi_error")), "unparsable: refused", 19),
          "entities in nvidia-smi.xml: %s", cJSON_GetStringValue(at(r, "gpu", "nvidia_smi_error")));
    cJSON_Delete(r);
}

int main(void)
{
    src = getenv("CP_SRC");
    if (!src)
        src = CP_SOURCE_DIR;
    test_xid();
    test_smi();
    test_logs();
    test_bundles();
    printf("%d checks, %d failed\n", checks, fails);
    return fails ? 1 : 0;
}
