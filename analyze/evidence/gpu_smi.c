/* gpu_smi.c - nvidia-smi -q -x XML through libxml2 (see gpu_smi.h). */
#include "gpu_smi.h"

#include "errmsg.h"
#include "lazylib.h"
#include "xid.h"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* libxml2, opened the first time a bundle has nvidia-smi XML (lazylib.h) */
static struct {
    int ok;
    __typeof__(&xmlSetGenericErrorFunc) SetGenericErrorFunc;
    __typeof__(&xmlNewParserCtxt) NewParserCtxt;
    __typeof__(&xmlCtxtReadMemory) CtxtReadMemory;
    __typeof__(&xmlCtxtGetLastError) CtxtGetLastError;
    __typeof__(&xmlFreeParserCtxt) FreeParserCtxt;
    __typeof__(&xmlDocGetRootElement) DocGetRootElement;
    __typeof__(&xmlFreeDoc) FreeDoc;
} X;

static int xml_load(char *err, size_t errlen)
{
    static struct cp_lazylib lib = {.soname = CP_SONAME_LIBXML2};
    if (X.ok)
        return 0;
    if (CP_LAZY_FN(&lib, X.SetGenericErrorFunc, xmlSetGenericErrorFunc, err, errlen) ||
        CP_LAZY_FN(&lib, X.NewParserCtxt, xmlNewParserCtxt, err, errlen) ||
        CP_LAZY_FN(&lib, X.CtxtReadMemory, xmlCtxtReadMemory, err, errlen) ||
        CP_LAZY_FN(&lib, X.CtxtGetLastError, xmlCtxtGetLastError, err, errlen) ||
        CP_LAZY_FN(&lib, X.FreeParserCtxt, xmlFreeParserCtxt, err, errlen) ||
        CP_LAZY_FN(&lib, X.DocGetRootElement, xmlDocGetRootElement, err, errlen) ||
        CP_LAZY_FN(&lib, X.FreeDoc, xmlFreeDoc, err, errlen))
        return -1;
    X.ok = 1;
    return 0;
}

static int is_el(const xmlNode *n, const char *name)
{
    return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

static const xmlNode *child(const xmlNode *n, const char *name)
{
    if (!n)
        return NULL;
    for (const xmlNode *c = n->children; c; c = c->next)
        if (is_el(c, name))
            return c;
    return NULL;
}

/* "a/b/c" below n */
static const xmlNode *path(const xmlNode *n, const char *p)
{
    char key[64];
    while (n && *p) {
        const char *sl = strchr(p, '/');
        size_t l = sl ? (size_t)(sl - p) : strlen(p);
        if (l >= sizeof(key))
            return NULL;
        memcpy(key, p, l);
        key[l] = 0;
        n = child(n, key);
        p += l + (sl ? 1 : 0);
    }
    return n;
}

/* The element's own text (text and CDATA children only, never entity references), trimmed. */
static void text_of(const xmlNode *n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    if (!n)
        return;
    for (const xmlNode *c = n->children; c; c = c->next) {
        if ((c->type != XML_TEXT_NODE && c->type != XML_CDATA_SECTION_NODE) || !c->content)
            continue;
        size_t l = strlen((const char *)c->content);
        if (o + l >= len)
            l = len - 1 - o;
        memcpy(buf + o, c->content, l);
        o += l;
        buf[o] = 0;
        if (o == len - 1)
            break;
    }
    size_t s = 0;
    while (buf[s] && isspace((unsigned char)buf[s]))
        s++;
    if (s)
        memmove(buf, buf + s, strlen(buf + s) + 1);
    o = strlen(buf);
    while (o && isspace((unsigned char)buf[o - 1]))
        buf[--o] = 0;
}

/* The leading number of "27 C", "22 MiB", "67.03 W", "0"; 0 when absent or "N/A". */
static int num_of(const xmlNode *n, double *out)
{
    char b[64];
    text_of(n, b, sizeof(b));
    if (!b[0] || !(isdigit((unsigned char)b[0]) || (b[0] == '-' && isdigit((unsigned char)b[1]))))
        return 0;
    char *end;
    double v = strtod(b, &end);
    if (!isfinite(v))
        return 0;
    *out = v;
    return 1;
}

static void add_num(cJSON *o, const char *key, int have, double v)
{
    if (have)
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

/* First of several alternative paths that has a number. */
static int num_alt(const xmlNode *g, const char *const *paths, double *out)
{
    for (; *paths; paths++)
        if (num_of(path(g, *paths), out))
            return 1;
    return 0;
}

/* Sum of the numbers at these paths below n; 0 when none of them has a number. */
static int num_sum(const xmlNode *n, const char *const *paths, double *out)
{
    int any = 0;
    double s = 0, v;
    for (; *paths; paths++)
        if (num_of(path(n, *paths), &v)) {
            s += v;
            any = 1;
        }
    *out = s;
    return any;
}

/* Yes/No -> 1/0, else -1 */
static int yes_no(const xmlNode *n)
{
    char b[32];
    text_of(n, b, sizeof(b));
    if (!strcasecmp(b, "yes") || !strcasecmp(b, "true"))
        return 1;
    if (!strcasecmp(b, "no") || !strcasecmp(b, "false"))
        return 0;
    return -1;
}

static void add_bool3(cJSON *o, const char *key, int v)
{
    if (v < 0)
        cJSON_AddNullToObject(o, key);
    else
        cJSON_AddBoolToObject(o, key, v);
}

static void add_text(cJSON *o, const char *key, const xmlNode *n)
{
    char b[512];
    text_of(n, b, sizeof(b));
    if (!n || !b[0] || !strcmp(b, "N/A")) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    /* valid UTF-8 already (libxml2 converts to UTF-8); keep printable ASCII-safe as is */
    cJSON_AddStringToObject(o, key, b);
}

static cJSON *ecc_part(const xmlNode *g)
{
    cJSON *e = cJSON_CreateObject();
    const xmlNode *ee = child(g, "ecc_errors");
    static const char *const sbe[] = {"single_bit/total", "sram_correctable", "dram_correctable",
                                      NULL};
    static const char *const dbe[] = {"double_bit/total", "sram_uncorrectable",
                                      "sram_uncorrectable_parity", "sram_uncorrectable_secded",
                                      "dram_uncorrectable", NULL};
    double v;
    int h;
    const xmlNode *vol = child(ee, "volatile"), *agg = child(ee, "aggregate");
    h = num_sum(vol, sbe, &v);
    add_num(e, "volatile_sbe", h, v);
    h = num_sum(vol, dbe, &v);
    add_num(e, "volatile_dbe", h, v);
    h = num_sum(agg, sbe, &v);
    add_num(e, "aggregate_sbe", h, v);
    h = num_sum(agg, dbe, &v);
    add_num(e, "aggregate_dbe", h, v);
    char mode[32];
    text_of(path(g, "ecc_mode/current_ecc"), mode, sizeof(mode));
    if (mode[0] && strcmp(mode, "N/A"))
        cJSON_AddStringToObject(e, "mode", mode);
    else
        cJSON_AddNullToObject(e, "mode");
    return e;
}

static cJSON *retired_part(const xmlNode *g)
{
    cJSON *r = cJSON_CreateObject();
    const xmlNode *rp = child(g, "retired_pages");
    double v;
    int h = num_of(path(rp, "multiple_single_bit_retirement/retired_count"), &v);
    add_num(r, "sbe", h, v);
    h = num_of(path(rp, "double_bit_retirement/retired_count"), &v);
    add_num(r, "dbe", h, v);
    int p1 = yes_no(child(rp, "pending_retirement")), p2 = yes_no(child(rp, "pending_blacklist"));
    add_bool3(r, "pending", p1 == 1 || p2 == 1 ? 1 : (p1 == 0 || p2 == 0 ? 0 : -1));
    return r;
}

static cJSON *remap_part(const xmlNode *g)
{
    cJSON *r = cJSON_CreateObject();
    const xmlNode *rr = child(g, "remapped_rows");
    double v;
    int h = num_of(child(rr, "remapped_row_corr"), &v);
    add_num(r, "correctable", h, v);
    h = num_of(child(rr, "remapped_row_unc"), &v);
    add_num(r, "uncorrectable", h, v);
    add_bool3(r, "pending", yes_no(child(rr, "remapped_row_pending")));
    add_bool3(r, "failure", yes_no(child(rr, "remapped_row_failure")));
    return r;
}

/* Active throttle / clocks-event reasons, by short name ("hw_slowdown"). */
static cJSON *throttle_part(const xmlNode *g)
{
    cJSON *a = cJSON_CreateArray();
    static const char *const blocks[][2] = {
        {"clocks_event_reasons", "clocks_event_reason_"},
        {"clocks_throttle_reasons", "clocks_throttle_reason_"},
    };
    for (size_t b = 0; b < 2; b++) {
        const xmlNode *blk = child(g, blocks[b][0]);
        if (!blk)
            continue;
        size_t pl = strlen(blocks[b][1]);
        for (const xmlNode *c = blk->children; c; c = c->next) {
            if (c->type != XML_ELEMENT_NODE)
                continue;
            char v[32];
            text_of(c, v, sizeof(v));
            if (strcmp(v, "Active"))
                continue;
            const char *name = (const char *)c->name;
            if (!strncmp(name, blocks[b][1], pl))
                name += pl;
            cJSON_AddItemToArray(a, cJSON_CreateString(name));
        }
        break; /* one of the two names */
    }
    return a;
}

static cJSON *procs_part(const xmlNode *g)
{
    cJSON *a = cJSON_CreateArray();
    const xmlNode *ps = child(g, "processes");
    int n = 0;
    for (const xmlNode *p = ps ? ps->children : NULL; p && n < 4096; p = p->next) {
        if (!is_el(p, "process_info"))
            continue;
        n++;
        cJSON *o = cJSON_CreateObject();
        double v;
        int h = num_of(child(p, "pid"), &v);
        add_num(o, "pid", h, v);
        add_text(o, "name", child(p, "process_name"));
        add_text(o, "type", child(p, "type"));
        h = num_of(child(p, "used_memory"), &v);
        add_num(o, "used_mib", h, v);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

static cJSON *gpu_part(const xmlNode *g, int index)
{
    cJSON *o = cJSON_CreateObject();
    double v, used = 0, total = 0;
    int h;
    if (num_of(child(g, "minor_number"), &v))
        cJSON_AddNumberToObject(o, "index", v);
    else
        cJSON_AddNumberToObject(o, "index", index);
    char pci[32] = "", raw[64] = "";
    /* <gpu id="00000000:3B:00.0">: the attribute's text node, read in place */
    const xmlAttr *id = g->properties;
    while (id && !(id->name && !strcmp((const char *)id->name, "id")))
        id = id->next;
    if (id && id->children && id->children->type == XML_TEXT_NODE && id->children->content)
        snprintf(raw, sizeof(raw), "%s", (const char *)id->children->content);
    else
        text_of(path(g, "pci/pci_bus_id"), raw, sizeof(raw));
    if (raw[0] && kline_pci_normalize(raw, pci, sizeof(pci)) == 0)
        cJSON_AddStringToObject(o, "pci", pci);
    else
        cJSON_AddNullToObject(o, "pci");
    add_text(o, "uuid", child(g, "uuid"));
    add_text(o, "name", child(g, "product_name"));
    int hu = num_of(path(g, "fb_memory_usage/used"), &used);
    int ht = num_of(path(g, "fb_memory_usage/total"), &total);
    add_num(o, "memory_used_mib", hu, used);
    add_num(o, "memory_total_mib", ht, total);
    add_num(o, "memory_used_pct", hu && ht && total > 0, total > 0 ? round(used / total * 1000) / 10 : 0);
    cJSON_AddItemToObject(o, "ecc", ecc_part(g));
    cJSON_AddItemToObject(o, "retired_pages", retired_part(g));
    cJSON_AddItemToObject(o, "remapped_rows", remap_part(g));
    h = num_of(path(g, "temperature/gpu_temp"), &v);
    add_num(o, "temperature_c", h, v);
    h = num_of(path(g, "temperature/memory_temp"), &v);
    add_num(o, "memory_temperature_c", h, v);
    static const char *const pw[] = {"power_readings/power_draw", "gpu_power_readings/power_draw",
                                     "gpu_power_readings/instant_power_draw",
                                     "gpu_power_readings/average_power_draw", NULL};
    static const char *const pl[] = {"power_readings/enforced_power_limit",
                                     "power_readings/power_limit",
                                     "gpu_power_readings/current_power_limit", NULL};
    h = num_alt(g, pw, &v);
    add_num(o, "power_w", h, v);
    h = num_alt(g, pl, &v);
    add_num(o, "power_limit_w", h, v);
    cJSON_AddItemToObject(o, "throttle_reasons", throttle_part(g));
    char rec[64];
    text_of(child(g, "gpu_recovery_action"), rec, sizeof(rec));
    if (rec[0] && strcmp(rec, "N/A"))
        cJSON_AddStringToObject(o, "recovery_action", rec);
    else if (yes_no(path(g, "gpu_reset_status/drain_and_reset_recommended")) == 1)
        cJSON_AddStringToObject(o, "recovery_action", "Drain and Reset");
    else if (yes_no(path(g, "gpu_reset_status/reset_required")) == 1)
        cJSON_AddStringToObject(o, "recovery_action", "GPU Reset");
    else
        cJSON_AddNullToObject(o, "recovery_action");
    cJSON_AddItemToObject(o, "processes", procs_part(g));
    cJSON_AddBoolToObject(o, "own", 0);
    return o;
}

/* libxml2 must not write to stderr from library code */
static void quiet(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

cJSON *gpu_smi_parse(const char *xml, size_t len, char *err, size_t errlen)
{
    if (len > GPU_SMI_MAX) {
        cp_errmsg(err, errlen, "refused: %zu bytes, over the %u MiB limit", len, GPU_SMI_MAX >> 20);
        return NULL;
    }
    if (len == 0) {
        cp_errmsg(err, errlen, "empty output");
        return NULL;
    }
    /* entity declarations are never in nvidia-smi's output: refuse them before parsing */
    if (memmem(xml, len, "<!ENTITY", 8)) {
        cp_errmsg(err, errlen, "refused: the XML declares entities (nvidia-smi never does)");
        return NULL;
    }
    if (xml_load(err, errlen))
        return NULL;
    X.SetGenericErrorFunc(NULL, quiet);
    xmlParserCtxtPtr ctxt = X.NewParserCtxt();
    if (!ctxt) {
        cp_errmsg(err, errlen, "out of memory");
        return NULL;
    }
    xmlDocPtr doc = X.CtxtReadMemory(ctxt, xml, (int)len, "nvidia-smi.xml", NULL,
                                      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc) {
        const xmlError *e = X.CtxtGetLastError(ctxt);
        char m[200] = "";
        if (e && e->message) {
            snprintf(m, sizeof(m), "%s", e->message);
            size_t l = strlen(m);
            while (l && (m[l - 1] == '\n' || m[l - 1] == ' '))
                m[--l] = 0;
        }
        cp_errmsg(err, errlen, "not XML: %s (line %d)", m[0] ? m : "parse error", e ? e->line : 0);
        X.FreeParserCtxt(ctxt);
        return NULL;
    }
    X.FreeParserCtxt(ctxt);
    cJSON *o = NULL;
    xmlNode *root = X.DocGetRootElement(doc);
    if (doc->intSubset && doc->intSubset->entities) {
        cp_errmsg(err, errlen, "refused: the XML declares entities (nvidia-smi never does)");
    } else if (!is_el(root, "nvidia_smi_log")) {
        cp_errmsg(err, errlen, "not nvidia-smi output: root element <%s>",
                  root ? (const char *)root->name : "none");
    } else {
        o = cJSON_CreateObject();
        add_text(o, "driver_version", child(root, "driver_version"));
        add_text(o, "cuda_version", child(root, "cuda_version"));
        add_text(o, "timestamp", child(root, "timestamp"));
        double v;
        int h = num_of(child(root, "attached_gpus"), &v);
        add_num(o, "attached_gpus", h, v);
        cJSON *gpus = cJSON_AddArrayToObject(o, "gpus");
        int i = 0;
        for (const xmlNode *c = root->children; c && i < 1024; c = c->next)
            if (is_el(c, "gpu"))
                cJSON_AddItemToArray(gpus, gpu_part(c, i++));
    }
    X.FreeDoc(doc);
    return o;
}
