/*
 * cxx.c — C++'s replaceable operator new and delete, on slabkit, in C:
 * plain, array, nothrow, aligned (C++17) and sized (C++14) forms, under
 * their Itanium-ABI names (x86-64: size_t is `m`).
 *
 * Without them libstdc++'s operators call malloc and free: one more call
 * each way, and sized delete's size thrown away.  Here new is malloc's
 * fast path, and sized delete skips free's page-map walk (malloc.h).
 *
 * Invariants:
 *  - Every operator is a weak definition: a program (or a static link)
 *    that defines its own wins without a clash.
 *  - The C++ rule holds: the forms a program does not replace are defined
 *    on the ones it does (array new calls new, sized and array delete call
 *    delete, ...).  While the eight basic operators as the program links
 *    them are all slabkit's, each form does its work directly; once any is
 *    the program's, each form of ours calls the form it derives from, so
 *    memory from the program's operator new only ever reaches the
 *    program's operator delete.
 *  - Out of memory: the throwing forms hand the request to the operator
 *    next after slabkit (libstdc++'s: it calls the new-handler, retries
 *    through slabkit's malloc, and throws std::bad_alloc); the nothrow
 *    forms to libstdc++'s nothrow ones.  With no operator next to us (a
 *    static link), the new-handler is called here and std::bad_alloc
 *    thrown through the C++ ABI (__cxa_throw, weak references); only a
 *    link without those pieces of the runtime aborts, with one line.
 *    slabkit's C frames carry unwind tables (x86-64's default), so the
 *    exception passes through them.
 * Lock order: none taken here.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "malloc/malloc.h"

#define CXX_API SK_API __attribute__((weak, used))
/* Export `name` as a weak alias of slabkit's own `own` (so that the
 * address the program links can be told from ours). */
#define CXX_ALIAS(name, own) \
    extern __typeof__(own) name __attribute__((weak, alias(#own), visibility("default")))

typedef void (*new_handler_t)(void);
/* std::get_new_handler(), where a C++ runtime is present. */
extern new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));

/* What throwing std::bad_alloc takes, in the Itanium C++ ABI, where a C++
 * runtime is linked in (weak: absent from C programs). */
extern void *__cxa_allocate_exception(size_t) __attribute__((weak));
extern void __cxa_throw(void *, void *, void (*)(void *)) __attribute__((weak));
extern char _ZTISt9bad_alloc[] __attribute__((weak));      /* typeinfo for std::bad_alloc */
extern void *_ZTVSt9bad_alloc[] __attribute__((weak));     /* its vtable */
extern void _ZNSt9bad_allocD1Ev(void *) __attribute__((weak));   /* its destructor */

/* Throw std::bad_alloc from C, if the runtime's pieces are linked in: the
 * object is one vtable pointer (past offset-to-top and typeinfo).  Returns
 * only if they are not. */
static void throw_bad_alloc(void)
{
    if (!__cxa_allocate_exception || !__cxa_throw || !_ZTISt9bad_alloc || !_ZTVSt9bad_alloc ||
        !_ZNSt9bad_allocD1Ev)
        return;
    void **e = __cxa_allocate_exception(sizeof(void *));
    *e = &_ZTVSt9bad_alloc[2];
    __cxa_throw(e, _ZTISt9bad_alloc, _ZNSt9bad_allocD1Ev);
}

static char nothrow_tag;   /* a std::nothrow_t to pass on (an empty struct) */

/* ---- out of memory ---- */

/* `sym` failed to get `size` bytes aligned to `align` (0: new's own). */
static SK_NOINLINE void *new_failed(const char *sym, size_t size, size_t align, bool nothrow)
{
    void *next = dlsym(RTLD_NEXT, sym);
    if (next) {
        if (nothrow)
            return align ? ((void *(*)(size_t, size_t, const void *))next)(size, align, &nothrow_tag)
                         : ((void *(*)(size_t, const void *))next)(size, &nothrow_tag);
        return align ? ((void *(*)(size_t, size_t))next)(size, align) : ((void *(*)(size_t))next)(size);
    }
    while (!nothrow && _ZSt15get_new_handlerv) {
        new_handler_t h = _ZSt15get_new_handlerv();
        if (!h)
            break;
        h();
        void *p = align ? malloc_aligned(align, size) : malloc_inline(size);
        if (p)
            return p;
    }
    if (nothrow)
        return NULL;
    throw_bad_alloc();
    os_fatal("out of memory: %s(%zu) cannot throw std::bad_alloc (no C++ runtime linked)", sym, size);
}

/* ---- the basic forms ---- */

static void *new_own(size_t size)
{
    void *p = malloc_inline(size);
    return likely(p) ? p : new_failed("_Znwm", size, 0, false);
}

static void *new_aligned_own(size_t size, size_t align)
{
    void *p = malloc_aligned(align, size);
    return likely(p) ? p : new_failed("_ZnwmSt11align_val_t", size, align, false);
}

static void delete_own(void *p)
{
    kfree_inline(p);
}

static void delete_aligned_own(void *p, size_t align)
{
    (void)align;
    kfree_inline(p);
}

static void *new_array_own(size_t size);
static void *new_array_aligned_own(size_t size, size_t align);
static void delete_array_own(void *p);
static void delete_array_aligned_own(void *p, size_t align);

CXX_ALIAS(_Znwm, new_own);                                   /* new(size_t) */
CXX_ALIAS(_Znam, new_array_own);                             /* new[](size_t) */
CXX_ALIAS(_ZnwmSt11align_val_t, new_aligned_own);            /* new(size_t, align_val_t) */
CXX_ALIAS(_ZnamSt11align_val_t, new_array_aligned_own);      /* new[](size_t, align_val_t) */
CXX_ALIAS(_ZdlPv, delete_own);                               /* delete(void *) */
CXX_ALIAS(_ZdaPv, delete_array_own);                         /* delete[](void *) */
CXX_ALIAS(_ZdlPvSt11align_val_t, delete_aligned_own);        /* delete(void *, align_val_t) */
CXX_ALIAS(_ZdaPvSt11align_val_t, delete_array_aligned_own);  /* delete[](void *, align_val_t) */

/* ---- are the basic forms ours? ---- */

enum { CXX_UNKNOWN, CXX_OURS, CXX_REPLACED };
static int cxx_state;

static SK_NOINLINE int cxx_resolve(void)
{
    /* Through volatiles: the exported names are interposable, so the
     * compiler may not fold these comparisons. */
    void *volatile linked[] = {
        (void *)_Znwm, (void *)_Znam, (void *)_ZnwmSt11align_val_t, (void *)_ZnamSt11align_val_t,
        (void *)_ZdlPv, (void *)_ZdaPv, (void *)_ZdlPvSt11align_val_t, (void *)_ZdaPvSt11align_val_t,
    };
    void *const own[] = {
        (void *)new_own, (void *)new_array_own, (void *)new_aligned_own, (void *)new_array_aligned_own,
        (void *)delete_own, (void *)delete_array_own, (void *)delete_aligned_own, (void *)delete_array_aligned_own,
    };
    int state = CXX_OURS;
    for (size_t i = 0; i < SK_ARRAY_SIZE(own); i++)
        if (linked[i] != own[i])
            state = CXX_REPLACED;
    __atomic_store_n(&cxx_state, state, __ATOMIC_RELAXED);
    return state;
}

static inline bool cxx_ours(void)
{
    int s = __atomic_load_n(&cxx_state, __ATOMIC_RELAXED);
    if (unlikely(s == CXX_UNKNOWN))
        s = cxx_resolve();
    return likely(s == CXX_OURS);
}

static bool cxx_ours_fn(void)
{
    return cxx_ours();
}

/* ---- the derived forms ---- */

static void *new_array_own(size_t size)
{
    if (unlikely(!cxx_ours()))
        return _Znwm(size);
    void *p = malloc_inline(size);
    return likely(p) ? p : new_failed("_Znam", size, 0, false);
}

static void *new_array_aligned_own(size_t size, size_t align)
{
    if (unlikely(!cxx_ours()))
        return _ZnwmSt11align_val_t(size, align);
    void *p = malloc_aligned(align, size);
    return likely(p) ? p : new_failed("_ZnamSt11align_val_t", size, align, false);
}

static void delete_array_own(void *p)
{
    if (unlikely(!cxx_ours()))
        _ZdlPv(p);
    else
        kfree_inline(p);
}

static void delete_array_aligned_own(void *p, size_t align)
{
    if (unlikely(!cxx_ours()))
        _ZdlPvSt11align_val_t(p, align);
    else
        kfree_inline(p);
}

/* new(size_t, nothrow_t const &) and the other nothrow forms.  Replaced
 * basics: libstdc++'s own nothrow form, which catches what the program's
 * new throws (C cannot); without one, the basic form itself. */
#define NOTHROW_NEW(name, base, ...)                                        \
    do {                                                                    \
        if (unlikely(!cxx_ours())) {                                        \
            void *next_ = dlsym(RTLD_NEXT, name);                           \
            return next_ ? NOTHROW_CALL(next_, __VA_ARGS__) : base(__VA_ARGS__); \
        }                                                                   \
    } while (0)

CXX_API void *_ZnwmRKSt9nothrow_t(size_t size, const void *nt)
{
    (void)nt;
#define NOTHROW_CALL(f, size) ((void *(*)(size_t, const void *))(f))(size, &nothrow_tag)
    NOTHROW_NEW("_ZnwmRKSt9nothrow_t", _Znwm, size);
    void *p = malloc_inline(size);
    return likely(p) ? p : new_failed("_ZnwmRKSt9nothrow_t", size, 0, true);
}

CXX_API void *_ZnamRKSt9nothrow_t(size_t size, const void *nt)
{
    (void)nt;
    NOTHROW_NEW("_ZnamRKSt9nothrow_t", _Znam, size);
    void *p = malloc_inline(size);
    return likely(p) ? p : new_failed("_ZnamRKSt9nothrow_t", size, 0, true);
#undef NOTHROW_CALL
}

CXX_API void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nt)
{
    (void)nt;
#define NOTHROW_CALL(f, size, align) \
    ((void *(*)(size_t, size_t, const void *))(f))(size, align, &nothrow_tag)
    NOTHROW_NEW("_ZnwmSt11align_val_tRKSt9nothrow_t", _ZnwmSt11align_val_t, size, align);
    void *p = malloc_aligned(align, size);
    return likely(p) ? p : new_failed("_ZnwmSt11align_val_tRKSt9nothrow_t", size, align, true);
}

CXX_API void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nt)
{
    (void)nt;
    NOTHROW_NEW("_ZnamSt11align_val_tRKSt9nothrow_t", _ZnamSt11align_val_t, size, align);
    void *p = malloc_aligned(align, size);
    return likely(p) ? p : new_failed("_ZnamSt11align_val_tRKSt9nothrow_t", size, align, true);
#undef NOTHROW_CALL
}

CXX_API void _ZdlPvRKSt9nothrow_t(void *p, const void *nt)
{
    (void)nt;
    _ZdlPv(p);
}

CXX_API void _ZdaPvRKSt9nothrow_t(void *p, const void *nt)
{
    (void)nt;
    _ZdaPv(p);
}

CXX_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *nt)
{
    (void)nt;
    _ZdlPvSt11align_val_t(p, align);
}

CXX_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *nt)
{
    (void)nt;
    _ZdaPvSt11align_val_t(p, align);
}

/* ---- sized delete: the size names the class (malloc.h) ---- */

static struct sized_entry delete_entry = {
    SIZED_UNKNOWN, false, "operator delete", (void *)_ZdlPv, cxx_ours_fn
};
static struct sized_entry delete_array_entry = {
    SIZED_UNKNOWN, false, "operator delete[]", (void *)_ZdaPv, cxx_ours_fn
};
static struct sized_entry delete_aligned_entry = {
    SIZED_UNKNOWN, true, "operator delete", (void *)_ZdlPvSt11align_val_t, cxx_ours_fn
};
static struct sized_entry delete_array_aligned_entry = {
    SIZED_UNKNOWN, true, "operator delete[]", (void *)_ZdaPvSt11align_val_t, cxx_ours_fn
};

CXX_API void _ZdlPvm(void *p, size_t size)                   /* delete(void *, size_t) */
{
    sized_free(&delete_entry, p, size, 0);
}

CXX_API void _ZdaPvm(void *p, size_t size)                   /* delete[](void *, size_t) */
{
    sized_free(&delete_array_entry, p, size, 0);
}

CXX_API void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t align)
{
    sized_free(&delete_aligned_entry, p, size, align);
}

CXX_API void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t align)
{
    sized_free(&delete_array_aligned_entry, p, size, align);
}
