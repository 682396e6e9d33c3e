// cxx_sized.cc — C++'s sized and aligned operator new and delete.
//
// Built plain (no allocator linked): under tests/run it checks the
// language's behaviour on libstdc++'s operators; tests/programs/cxx_ops.t
// runs it again with LD_PRELOAD=libslabkit.so and SK_EXPECT_SLABKIT=1,
// where it also proves the operators are slabkit's: each of the twenty
// names resolves into libslabkit (dladdr), and objects made with new and
// returned by sized delete, sized delete[] and aligned sized delete go back
// to the kmalloc cache their size names (sk_cache_info, found with dlsym).
// Both ways: over-aligned new is aligned, a size that cannot be had throws
// std::bad_alloc (plain and aligned), nothrow new returns nullptr, and the
// new-handler runs before the throw.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "slabkit.h"

namespace {

int tests_run, tests_failed;

// Counts are taken before the name is built (c_ below): a std::string
// allocates, which would disturb them.
void check(bool cond, const std::string &name)
{
    ++tests_run;
    std::printf("%sok %d - %s\n", cond ? "" : "not ", tests_run, name.c_str());
    if (!cond)
        ++tests_failed;
}

struct Obj100 { char b[100]; };
struct alignas(64) Obj64 { char b[100]; };
struct alignas(256) Obj256 { char b[300]; };

// What sk_cache_info says, when slabkit is there (else 0).  Found with
// dlsym: the program links no allocator.
using info_fn = decltype(&sk_cache_info);
info_fn sk_info;

unsigned long active(const char *cache)
{
    struct sk_cache_info i;
    return sk_info && sk_info(cache, &i) == 0 ? i.active_objs : 0;
}

int handler_calls;
void handler()
{
    ++handler_calls;
    std::set_new_handler(nullptr);   // the next failure throws
}

// The compiler may drop a new/delete pair it sees (C++14): let it see none.
void *volatile sink;
template <class T> __attribute__((noinline)) T *volatile_new() { T *p = new T; sink = p; return p; }

}  // namespace

int main()
{
    const char *expect = std::getenv("SK_EXPECT_SLABKIT");
    bool slabkit = expect && *expect == '1';
    sk_info = reinterpret_cast<info_fn>(dlsym(RTLD_DEFAULT, "sk_cache_info"));
    if (slabkit) {
        static const char *const ops[] = {
            "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
            "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
            "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
            "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
            "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
        };
        int ours = 0;
        std::string missing;
        for (const char *op : ops) {
            Dl_info di;
            void *f = dlsym(RTLD_DEFAULT, op);
            if (f && dladdr(f, &di) && di.dli_fname && std::strstr(di.dli_fname, "libslabkit"))
                ++ours;
            else
                missing += std::string(" ") + op;
        }
        check(ours == 20, "all 20 operator new/delete forms resolve into libslabkit" +
                              (missing.empty() ? std::string() : " (not:" + missing + ")"));
        check(sk_info != nullptr, "sk_cache_info is there to count with");

        enum { N = 1000 };
        static Obj100 *p[N];
        unsigned long a112 = active("kmalloc-112");
        for (auto &q : p)
            q = volatile_new<Obj100>();
        { bool c_ = active("kmalloc-112") - a112 == N; check(c_, "new Obj100 (100 bytes) takes kmalloc-112 objects"); }
        for (auto &q : p)
            delete q;    // sized delete: operator delete(void *, 100)
        { bool c_ = active("kmalloc-112") == a112; check(c_, "sized delete gives every one back"); }

        static char *arr[N];
        unsigned long a64 = active("kmalloc-64");
        for (auto &q : arr) {
            q = new char[50];
            sink = q;
        }
        { bool c_ = active("kmalloc-64") - a64 == N; check(c_, "new char[50] takes kmalloc-64 objects"); }
        for (auto &q : arr)
            ::operator delete[](q, 50);
        { bool c_ = active("kmalloc-64") == a64; check(c_, "sized delete[] (50) gives every one back"); }

        static Obj64 *al[N];
        unsigned long a128 = active("kmalloc-128");
        for (auto &q : al)
            q = volatile_new<Obj64>();
        { bool c_ = active("kmalloc-128") - a128 == N; check(c_, "new of an alignas(64) 128-byte type takes kmalloc-128 objects"); }
        for (auto &q : al)
            delete q;    // aligned sized delete
        { bool c_ = active("kmalloc-128") == a128; check(c_, "aligned sized delete gives every one back"); }
    }

    bool aligned = true;
    for (int i = 0; i < 100; i++) {
        Obj64 *a = volatile_new<Obj64>();
        Obj256 *b = volatile_new<Obj256>();
        aligned = aligned && (reinterpret_cast<uintptr_t>(a) & 63) == 0 && (reinterpret_cast<uintptr_t>(b) & 255) == 0;
        delete a;
        delete b;
    }
    check(aligned, "over-aligned new (alignas 64, 256) returns aligned objects");

    volatile size_t huge = SIZE_MAX / 4;
    bool threw = false;
    try {
        void *v = ::operator new(huge);
        ::operator delete(v);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw, "operator new of SIZE_MAX/4 bytes throws std::bad_alloc");
    threw = false;
    try {
        void *v = ::operator new(huge, std::align_val_t(64));
        ::operator delete(v, std::align_val_t(64));
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw, "aligned operator new of SIZE_MAX/4 bytes throws std::bad_alloc");
    check(::operator new(huge, std::nothrow) == nullptr, "nothrow new of SIZE_MAX/4 bytes returns nullptr");
    check(::operator new[](huge, std::align_val_t(64), std::nothrow) == nullptr,
          "aligned nothrow new[] of SIZE_MAX/4 bytes returns nullptr");

    std::set_new_handler(handler);
    threw = false;
    try {
        void *v = ::operator new(huge);
        ::operator delete(v);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw && handler_calls == 1, "the new-handler runs once, then new throws (" +
                                           std::to_string(handler_calls) + " calls)");

    std::printf("1..%d\n", tests_run);
    return tests_failed ? 1 : 0;
}
