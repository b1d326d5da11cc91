/* secret.c - which environment variables and command-line arguments hold secrets (config.h):
 * shared by the capture (capture/proc.c) and the supervisor (crashpack run). */
#include "config.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

/* Names whose values are secrets (case-insensitive globs). *PASS* covers PASSWORD, PASSWD,
 * PASSPHRASE, DB_PASS; *PWD* covers MYSQL_PWD. */
static const char *const secret_names[] = {"*PASS*", "*PWD*", "*SECRET*", "*TOKEN*", "*KEY*",
                                           "*CREDENTIAL*", "*AUTH*", "*COOKIE*", "*SESSION*",
                                           "*PRIVATE*", NULL};
/* ... except these, which the patterns would catch and that are not secrets: the shell's
 * working directories (kept: useful) and keyboard settings. */
static const char *const not_secret_names[] = {"PWD", "OLDPWD", "*KEYBOARD*", "*KEYMAP*", NULL};

static int match_list(const char *const *pats, const char *name)
{
    for (; *pats; pats++)
        if (!fnmatch(*pats, name, FNM_CASEFOLD))
            return 1;
    return 0;
}

int cp_secret_env_name(const struct cp_config *c, const char *name)
{
    if (match_list(secret_names, name) && !match_list(not_secret_names, name))
        return 1;
    char pats[CP_PATH_MAX];
    snprintf(pats, sizeof(pats), "%s", c->redact_patterns);
    for (char *save, *p = strtok_r(pats, ", ", &save); p; p = strtok_r(NULL, ", ", &save))
        if (!fnmatch(p, name, FNM_CASEFOLD))
            return 1;
    return 0;
}

/* Mask the password of scheme://user:pass@host in place (same length). */
void cp_mask_url_credentials(char *s)
{
    for (char *p = strstr(s, "://"); p; p = strstr(p + 3, "://")) {
        char *at = p + 3, *end = at + strcspn(at, "/ \t\"'");
        char *a = memchr(at, '@', (size_t)(end - at));
        if (!a)
            continue;
        char *colon = memchr(at, ':', (size_t)(a - at));
        for (char *q = colon ? colon + 1 : at; q < a; q++)
            *q = '*';
    }
}

/* The flag's name as an environment-style name: "--api-key=x" -> "api_key". */
static void flag_key(const char *k, size_t kl, char *key, size_t keysz)
{
    if (kl >= keysz)
        kl = keysz - 1;
    memcpy(key, k, kl);
    key[kl] = 0;
    for (char *q = key; *q; q++)
        if (*q == '-')
            *q = '_';
}

/* Command-line secrets: --token=x, --api-key x, --password=..., --passphrase x, -p x, and
 * KEY=value arguments (db.password=x, HF_TOKEN=x) whose KEY looks secret: mask the value (same
 * length). The value after a bare flag is masked unless it is itself an option. */
void cp_mask_cmdline(const struct cp_config *cfg, char **argv, int argc)
{
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        cp_mask_url_credentials(a);
        char key[128];
        if (a[0] != '-') {
            char *eq = strchr(a, '=');
            if (i == 0 || !eq || eq == a)
                continue;
            flag_key(a, (size_t)(eq - a), key, sizeof(key));
            if (cp_secret_env_name(cfg, key))
                memset(eq + 1, '*', strlen(eq + 1));
            continue;
        }
        const char *k = a + strspn(a, "-");
        size_t kl = strcspn(k, "=");
        flag_key(k, kl, key, sizeof(key));
        /* -p: the password of mysql, sshpass, openssl and many more */
        if (!cp_secret_env_name(cfg, key) && strcmp(a, "-p"))
            continue;
        if (k[kl] == '=')
            memset((char *)k + kl + 1, '*', strlen(k + kl + 1));
        else if (i + 1 < argc && argv[i + 1][0] != '-')
            memset(argv[i + 1], '*', strlen(argv[i + 1]));
    }
}
