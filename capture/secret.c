/* secret.c - which environment variables and command-line arguments hold secrets (config.h):
 * shared by the capture (capture/proc.c) and the supervisor (crashpack run). */
#include "config.h"
#include "scrub.h"

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

/* Whether the command line runs a program that takes its password as -pSECRET. */
static int takes_attached_p(char **argv, int argc)
{
    static const char *const progs[] = {"mysql", "mariadb", "sshpass", NULL};
    for (int i = 0; i < argc && i < 4; i++) {
        const char *b = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        for (int k = 0; progs[k]; k++)
            if (!strncmp(b, progs[k], strlen(progs[k])))
                return 1;
    }
    return 0;
}

/* Command-line secrets: --token=x, --api-key x, --password=..., --passphrase x, -p x, -pX (of
 * mysql, mariadb, sshpass), and KEY=value arguments (db.password=x, HF_TOKEN=x) whose KEY looks
 * secret: mask the value (same length). The value after a bare flag is masked unless it is
 * itself an option. Then the secrets of each argument's text, by their shape (scrub.h). */
void cp_mask_cmdline(const struct cp_config *cfg, char **argv, int argc)
{
    int attached_p = takes_attached_p(argv, argc);
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        cp_mask_secrets(a);
        if (attached_p && a[0] == '-' && a[1] == 'p' && a[2])
            memset(a + 2, '*', strlen(a + 2));
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
