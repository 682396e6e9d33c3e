/*
 * cache_names — a cache's name is how slabinfo, debug_caches and
 * sk_cache_info find it, so sk_cache_create keeps names unique and whole:
 *  - a second cache of a live cache's name is refused: NULL, errno EEXIST,
 *    one line on stderr naming it (the kernel's "cache already exists");
 *    sk_cache_info still finds the first; a kmalloc cache's name is taken
 *    too;
 *  - the name is free again once its cache is destroyed;
 *  - names of 1 to 31 bytes are kept whole; a longer one, or an empty
 *    one, is refused (EINVAL, a message), never cut;
 *  - 8 threads creating one name at once: exactly one gets the cache;
 *  - errno is left alone on success.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

static char captured[4096];

/* sk_cache_create with stderr captured into `captured`. */
static sk_cache_t *create_capture(const char *name, int *err)
{
    FILE *tmp = tmpfile();
    if (!tmp)
        BAIL("tmpfile failed");
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    errno = 1234;
    sk_cache_t *c = sk_cache_create(name, 64, 0, 0, NULL);
    *err = errno;
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(captured, 1, sizeof captured - 1, tmp);
    while (n && captured[n - 1] == '\n')
        n--;
    captured[n] = 0;
    fclose(tmp);
    return c;
}

static sk_cache_t *race_won[8];

static void *racer(void *arg)
{
    race_won[(long)arg] = sk_cache_create("raced", 48, 0, 0, NULL);
    return NULL;
}

int main(void)
{
    plan(16);
    int err;
    sk_cache_t *a = create_capture("conn", &err);
    ok(a && err == 1234 && !captured[0], "a new name: created, errno untouched, nothing printed");
    sk_cache_t *b = create_capture("conn", &err);
    ok(!b && err == EEXIST, "the same name again: NULL, EEXIST (errno %d)", err);
    ok(strstr(captured, "slabkit: sk_cache_create: a cache named 'conn' exists already") != NULL,
       "  one line saying so: %s", captured);
    struct sk_cache_info info;
    ok(sk_cache_info("conn", &info) == 0 && info.object_size == 64, "sk_cache_info finds the first");
    sk_cache_t *k = create_capture("kmalloc-64", &err);
    ok(!k && err == EEXIST, "a kmalloc cache's name is taken too");
    ok(sk_cache_destroy(a) == 0, "the first destroyed");
    sk_cache_t *c = create_capture("conn", &err);
    ok(c != NULL, "then the name is free again");

    char name31[32], name32[40];
    memset(name31, 'n', 31);
    name31[31] = 0;
    memset(name32, 'm', 32);
    name32[32] = 0;
    sk_cache_t *l31 = create_capture(name31, &err);
    ok(l31 && sk_cache_info(name31, &info) == 0 && strlen(info.name) == 31, "a 31-byte name is kept whole");
    sk_cache_t *l32 = create_capture(name32, &err);
    ok(!l32 && err == EINVAL, "a 32-byte name is refused: EINVAL (errno %d)", err);
    ok(strstr(captured, "names are 1 to 31 bytes") != NULL, "  saying why: %s", captured);
    char name31b[32];
    memcpy(name31b, name32, 31);
    name31b[31] = 0;
    ok(sk_cache_info(name31b, &info) != 0, "  and no cache of its first 31 bytes was made");
    const char *name52 = "a-connection-pool-for-the-reverse-proxy-front-end-01";
    ok(!create_capture(name52, &err) && err == EINVAL, "a 52-byte name is refused, not cut to 31");
    ok(!create_capture("", &err) && err == EINVAL, "an empty name is refused");

    pthread_t t[8];
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 2);                     /* the seven refusals' lines */
    for (long i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, racer, (void *)i);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    dup2(saved, 2);
    close(saved);
    close(null);
    int won = 0;
    sk_cache_t *winner = NULL;
    for (int i = 0; i < 8; i++)
        if (race_won[i]) {
            won++;
            winner = race_won[i];
        }
    ok(won == 1, "8 threads create one name at once: %d got it", won);
    void *o = winner ? sk_cache_alloc(winner) : NULL;
    ok(o != NULL, "  and it works");
    sk_cache_free(winner, o);
    ok(sk_cache_destroy(winner) == 0 && sk_cache_destroy(c) == 0 && sk_cache_destroy(l31) == 0,
       "every cache made here is destroyed");
    return done_testing();
}
