// cxx_threads.cc — C++ new/delete through slabkit: a multi-threaded program
// of std::map, std::string, std::unordered_map and std::vector, objects
// made in one thread and destroyed in another, exceptions thrown and caught
// in threads, over-aligned new (alignas 64..4096), and std::bad_alloc /
// nothrow new for a size that cannot be had.
//
// Built plain (no allocator linked), so it prints TAP and runs as is under
// tests/run (glibc's malloc); tests/programs/programs_cxx.t runs it again
// with LD_PRELOAD=libslabkit.so and SK_EXPECT_SLABKIT=1, where it also
// proves that operator new's memory is slabkit's (sk_usable_size, found
// with dlsym, knows every block new handed out).
#include <dlfcn.h>
#include <malloc.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

int tests_run, tests_failed;

void check(bool cond, const std::string &name)
{
    ++tests_run;
    std::printf("%sok %d - %s\n", cond ? "" : "not ", tests_run, name.c_str());
    if (!cond)
        ++tests_failed;
    std::fflush(stdout);
}

std::string make_value(unsigned seed, unsigned len)
{
    std::string s;
    for (unsigned i = 0; i < len; i++)
        s.push_back(static_cast<char>('a' + (seed + i * 7) % 26));
    return s;
}

// A queue that hands strings from producers to a consumer thread, which
// destroys them: every string is freed by a thread that did not make it.
struct handoff {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::unique_ptr<std::string>> q;
    int producers_left = 0;
};

std::atomic<long> bad_values{0};

void map_worker(unsigned id, handoff *h)
{
    std::map<std::string, std::string> m;
    std::unordered_map<std::string, std::vector<int>> um;
    for (unsigned i = 0; i < 20000; i++) {
        std::string key = "key-" + std::to_string(id) + "-" + std::to_string(i) + make_value(i, i % 40);
        m.emplace(key, make_value(i * 31 + id, 10 + i % 300));
        if (i % 4 == 0)
            um[key].assign(i % 50, static_cast<int>(i));
    }
    for (unsigned i = 0; i < 20000; i += 2) {
        std::string key = "key-" + std::to_string(id) + "-" + std::to_string(i) + make_value(i, i % 40);
        auto it = m.find(key);
        if (it == m.end() || it->second != make_value(i * 31 + id, 10 + i % 300))
            ++bad_values;
        else
            m.erase(it);
    }
    if (m.size() != 10000)
        ++bad_values;
    // Exceptions allocate their object with malloc (__cxa_allocate_exception).
    for (unsigned i = 0; i < 500; i++) {
        try {
            throw std::runtime_error("a message long enough to be on the heap " + std::to_string(i));
        } catch (const std::runtime_error &e) {
            if (std::strncmp(e.what(), "a message", 9) != 0)
                ++bad_values;
        }
    }
    for (unsigned i = 0; i < 5000; i++) {
        auto s = std::make_unique<std::string>(make_value(id + i, 20 + i % 500));
        std::lock_guard<std::mutex> g(h->m);
        h->q.push_back(std::move(s));
        h->cv.notify_one();
    }
    std::lock_guard<std::mutex> g(h->m);
    if (--h->producers_left == 0)
        h->cv.notify_all();
}

void consumer(handoff *h, long *consumed)
{
    std::unique_lock<std::mutex> l(h->m);
    for (;;) {
        h->cv.wait(l, [h] { return !h->q.empty() || h->producers_left == 0; });
        if (h->q.empty())
            return;
        auto s = std::move(h->q.front());
        h->q.pop_front();
        l.unlock();
        if (s->size() < 20)
            ++bad_values;
        s.reset();                       // delete in this thread
        ++*consumed;
        l.lock();
    }
}

template <std::size_t Align> struct alignas(Align) aligned_block {
    unsigned char bytes[Align + 8];
};

template <std::size_t Align> bool aligned_new_ok()
{
    std::vector<aligned_block<Align> *> v;
    bool good = true;
    for (int i = 0; i < 50; i++) {
        auto *b = new aligned_block<Align>;
        std::memset(b->bytes, i, sizeof b->bytes);
        good &= reinterpret_cast<std::uintptr_t>(b) % Align == 0;
        v.push_back(b);
    }
    for (auto *b : v)
        delete b;
    auto *arr = new aligned_block<Align>[7];
    good &= reinterpret_cast<std::uintptr_t>(arr) % Align == 0;
    delete[] arr;
    return good;
}

} // namespace

int main()
{
    // The program's own success.
    handoff h;
    h.producers_left = 4;
    long consumed = 0;
    std::thread c(consumer, &h, &consumed);
    std::vector<std::thread> workers;
    for (unsigned id = 0; id < 4; id++)
        workers.emplace_back(map_worker, id, &h);
    for (auto &t : workers)
        t.join();
    c.join();
    check(bad_values == 0, "4 threads built, searched and pruned std::map/std::unordered_map of std::string");
    check(consumed == 4 * 5000, "20,000 strings made in 4 threads were deleted by another");

    check(aligned_new_ok<64>() && aligned_new_ok<256>() && aligned_new_ok<4096>(),
          "over-aligned new (alignas 64, 256, 4096) returns aligned blocks");

    bool threw = false;
    try {
        // Called, not a new-expression: a compiler may elide a
        // new-expression's allocation (clang does), never a call.
        volatile std::size_t huge = static_cast<std::size_t>(1) << 62;
        char *p = static_cast<char *>(::operator new[](huge));
        p[0] = 1;
        ::operator delete[](p);
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    check(threw, "new of 2^62 bytes throws std::bad_alloc");
    volatile std::size_t huge = static_cast<std::size_t>(1) << 62;
    void *np = ::operator new[](huge, std::nothrow);
    check(np == nullptr, "nothrow new of 2^62 bytes returns nullptr");
    ::operator delete[](np);

    // Proof that new/delete went through slabkit, when it is preloaded.
    using usable_fn = std::size_t (*)(const void *);
    auto sk_usable = reinterpret_cast<usable_fn>(dlsym(RTLD_DEFAULT, "sk_usable_size"));
    const char *expect = std::getenv("SK_EXPECT_SLABKIT");
    if (!sk_usable && !(expect && *expect == '1')) {
        std::printf("ok %d # skip slabkit is not loaded (run by tests/programs/programs_cxx.t)\n", ++tests_run);
    } else if (!sk_usable) {
        check(false, "slabkit is loaded (sk_usable_size found)");
    } else {
        bool all = true;
        for (std::size_t n : {1u, 24u, 64u, 200u, 1000u, 5000u, 70000u, 2000000u}) {
            char *p = new char[n];
            std::memset(p, 5, n);
            all &= sk_usable(p) >= n && sk_usable(p) == malloc_usable_size(p);
            delete[] p;
            auto *s = new std::string(n, 'x');
            all &= sk_usable(s) >= sizeof *s;
            if (n > 15)                  // past the small-string buffer
                all &= sk_usable(s->data()) >= n;
            delete s;
        }
        auto *b = new aligned_block<256>;
        all &= sk_usable(b) >= sizeof *b;
        delete b;
        check(all, "operator new's blocks (plain, std::string, over-aligned) are slabkit's");
    }
    std::printf("1..%d\n", tests_run);
    return tests_failed ? 1 : 0;
}
