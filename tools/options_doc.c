/*
 * options_doc — the options table of src/os/options.c, printed for the
 * documentation (tools/gen-options splices it into README.md and
 * docs/options.md, and checks slabkit(7) and docs/design.md against it).
 *
 *   options_doc md     a markdown table: key, default, values, meaning
 *   options_doc list   key TAB default TAB values, one option a line
 *
 * It prints the defaults whatever SLABKIT_OPTIONS says: the table is read
 * before the environment is.
 */
#include <stdio.h>
#include <string.h>

#include "os/os.h"

/* A markdown cell: `|` escaped. */
static void cell(const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            putchar('\\');
        putchar(*s);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    struct sk_option_doc d;
    if (!strcmp(mode, "md")) {
        printf("| key | default | values | meaning |\n| --- | --- | --- | --- |\n");
        for (unsigned i = 0; sk_option_doc(i, &d) == 0; i++) {
            printf("| `%s` | %s | ", d.key, d.def);
            cell(d.values);
            printf(" | ");
            cell(d.help);
            if (d.idle_why) {
                printf("; needs ");
                cell(d.idle_why);
            }
            printf(" |\n");
        }
        return 0;
    }
    if (!strcmp(mode, "list")) {
        for (unsigned i = 0; sk_option_doc(i, &d) == 0; i++)
            printf("%s\t%s\t%s\n", d.key, d.def, d.values);
        return 0;
    }
    fprintf(stderr, "usage: options_doc md|list\n");
    return 2;
}
