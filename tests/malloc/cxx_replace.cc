// cxx_replace.cc — a program that replaces only the basic operator new
// and operator delete keeps the C++ rule under slabkit: the forms it does
// not replace (sized delete, array new and delete, nothrow new) reach its
// own two, never slabkit's malloc and free, so memory from its new always
// comes back to its delete.
//
// Its operators hand out blocks from a static arena with a tag before
// each, count, and abort on a block that is not theirs.  Built plain;
// tests/programs/cxx_ops.t runs it with LD_PRELOAD=libslabkit.so (where
// slabkit's sized delete, array and nothrow forms stand in for
// libstdc++'s) and under tests/run it runs on libstdc++'s.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

// On purpose: only the two basic operators are replaced.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wsized-deallocation"
#endif

namespace {

int tests_run, tests_failed;
int news, deletes;

// Plain strings: a std::string would itself call the counted operators.
void check(bool cond, const char *name)
{
    ++tests_run;
    std::printf("%sok %d - %s\n", cond ? "" : "not ", tests_run, name);
    if (!cond) {
        ++tests_failed;
        std::printf("#   news %d, deletes %d\n", news, deletes);
    }
}

constexpr uint64_t TAG = 0x5eed5eed5eed5eedull;
alignas(64) unsigned char arena[1 << 20];
size_t used;

}  // namespace

void *operator new(size_t n)
{
    size_t need = (n + 16 + 15) & ~size_t(15);
    if (used + need > sizeof arena)
        throw std::bad_alloc();
    unsigned char *p = arena + used;
    used += need;
    *reinterpret_cast<uint64_t *>(p) = TAG;
    ++news;
    return p + 16;
}

void operator delete(void *p) noexcept
{
    if (!p)
        return;
    unsigned char *b = static_cast<unsigned char *>(p) - 16;
    if (b < arena || b >= arena + sizeof arena || *reinterpret_cast<uint64_t *>(b) != TAG) {
        std::fprintf(stderr, "cxx_replace: operator delete(%p) of a block its new never gave\n", p);
        std::abort();
    }
    *reinterpret_cast<uint64_t *>(b) = 0;
    ++deletes;
}

namespace {
struct Obj { char b[100]; };
// The compiler may drop a new/delete pair it sees (C++14): let it see none.
void *volatile sink;
template <class T> __attribute__((noinline)) T *make() { T *p = new T; sink = p; return p; }
__attribute__((noinline)) char *make_array(size_t n) { char *p = new char[n]; sink = p; return p; }
}  // namespace

int main()
{
    // The runtime may use the operators before main: count from here.
    news = deletes = 0;
    Obj *o = make<Obj>();
    check(news == 1, "new Obj calls the program's operator new");
    delete o;    // sized delete: operator delete(void *, size_t), not replaced
    check(deletes == 1, "delete of it (sized) reaches the program's operator delete");

    char *a = make_array(300);
    check(news == 2, "new char[] (not replaced) calls the program's operator new");
    delete[] a;
    check(deletes == 2, "delete[] (not replaced) reaches the program's operator delete");

    void *nt = ::operator new(64, std::nothrow);
    sink = nt;
    check(news == 3 && nt != nullptr, "nothrow new (not replaced) calls the program's operator new");
    ::operator delete(nt, std::nothrow);
    check(deletes == 3, "nothrow delete reaches the program's operator delete");

    void *sized = ::operator new[](40);
    sink = sized;
    ::operator delete[](sized, 40);
    check(news == 4 && deletes == 4, "sized delete[] of new[] memory reaches the program's pair");

    void *m = std::malloc(100);
    check(m != nullptr, "malloc still works beside them");
    std::free(m);

    std::printf("1..%d\n", tests_run);
    return tests_failed ? 1 : 0;
}
