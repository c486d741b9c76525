// An Oclgrind plugin for tools/cost_model.sh: what each kernel launch costs, as a GPU would see
// it. Oclgrind interprets every work-item and tells a plugin each instruction and memory access;
// this one counts, per launch:
//   insts, max_item_insts  LLVM instructions in all, and in the busiest work-item (the longest
//                       chain a launch waits on: one item doing serial work shows here)
//   load_bytes, store_bytes, local_load_bytes  bytes moved by loads and stores
//   unique_bytes        distinct 32-byte sectors of global memory loaded, times 32: what a launch
//                       must bring from memory at least (weights, caches, activations)
//   warp_loads, sectors, min_sectors  coalescing: the work-items of a group taken 32 at a time
//                       in local-id order (a warp; a smaller group is one), each load
//                       instruction's n-th execution in the 32 items as one warp load; sectors:
//                       the distinct 32-byte sectors it touches, min_sectors: the fewest that
//                       could hold the distinct bytes it reads. min_sectors / sectors is 1 for
//                       perfectly coalesced loads (and broadcasts), 1/8 when each item's 4
//                       bytes lie in sectors of their own.
// One JSON object per launch, appended to the file $CLINFER_COST_OUT (else stderr).
// Built by tools/cost_model.sh against liboclgrind-dev; loaded with oclgrind --plugins.
#include <oclgrind/Context.h>
#include <oclgrind/Kernel.h>
#include <oclgrind/KernelInvocation.h>
#include <oclgrind/Memory.h>
#include <oclgrind/Plugin.h>
#include <oclgrind/WorkGroup.h>
#include <oclgrind/WorkItem.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace {

const size_t SECTOR = 32, WARP = 32;

struct Key {
    const void *inst;
    size_t a, b;
    bool operator==(const Key &o) const { return inst == o.inst && a == o.a && b == o.b; }
};
struct KeyHash {
    size_t operator()(const Key &k) const {
        size_t h = std::hash<const void *>()(k.inst);
        h ^= k.a * 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h ^= k.b * 0xc2b2ae3d27d4eb4full + (h << 6) + (h >> 2);
        return h;
    }
};

// One warp load: the byte ranges its items read.
struct WarpLoad {
    std::vector<std::pair<size_t, size_t>> ranges; // [begin, end)
};

struct Launch {
    std::string kernel;
    size_t global[3], local[3], groups = 0;
    unsigned long long insts = 0, max_item_insts = 0, load_bytes = 0, store_bytes = 0,
                       local_load_bytes = 0, warp_loads = 0, sectors = 0, min_sectors = 0;
    std::unordered_set<size_t> touched; // global sectors loaded
};

class CostModel : public oclgrind::Plugin {
  public:
    explicit CostModel(const oclgrind::Context *context) : oclgrind::Plugin(context) {}

    bool isThreadSafe() const override { return false; } // Oclgrind then runs one thread

    void kernelBegin(const oclgrind::KernelInvocation *k) override {
        launch = Launch();
        launch.kernel = k->getKernel()->getName();
        oclgrind::Size3 g = k->getGlobalSize(), l = k->getLocalSize();
        for (unsigned i = 0; i < 3; i++) {
            launch.global[i] = g[i];
            launch.local[i] = l[i];
        }
    }

    void workGroupBegin(const oclgrind::WorkGroup *) override {
        launch.groups++;
        item_insts.assign(launch.local[0] * launch.local[1] * launch.local[2], 0);
        seen.clear();
        warps.clear();
    }

    void instructionExecuted(const oclgrind::WorkItem *wi, const llvm::Instruction *,
                             const oclgrind::TypedValue &) override {
        launch.insts++;
        size_t id = linear(wi);
        if (id < item_insts.size()) item_insts[id]++;
    }

    void memoryLoad(const oclgrind::Memory *memory, const oclgrind::WorkItem *wi, size_t address,
                    size_t size) override {
        unsigned space = memory->getAddressSpace();
        if (space == oclgrind::AddrSpaceLocal) launch.local_load_bytes += size;
        if (space != oclgrind::AddrSpaceGlobal && space != oclgrind::AddrSpaceConstant) return;
        launch.load_bytes += size;
        for (size_t s = address / SECTOR; s <= (address + size - 1) / SECTOR; s++)
            launch.touched.insert(s);
        size_t id = linear(wi);
        const void *inst = wi->getCurrentInstruction();
        size_t nth = seen[Key{inst, id, 0}]++;
        warps[Key{inst, nth, id / WARP}].ranges.emplace_back(address, address + size);
    }

    void memoryStore(const oclgrind::Memory *memory, const oclgrind::WorkItem *, size_t,
                     size_t size, const uint8_t *) override {
        if (memory->getAddressSpace() == oclgrind::AddrSpaceGlobal) launch.store_bytes += size;
    }

    void workGroupComplete(const oclgrind::WorkGroup *) override {
        for (unsigned long long n : item_insts)
            launch.max_item_insts = std::max(launch.max_item_insts, n);
        for (auto &w : warps) {
            auto &r = w.second.ranges;
            std::sort(r.begin(), r.end());
            std::vector<size_t> secs;
            size_t distinct = 0, end = 0;
            for (auto &x : r) {
                size_t begin = std::max(x.first, end);
                if (x.second > begin) distinct += x.second - begin;
                end = std::max(end, x.second);
                for (size_t s = x.first / SECTOR; s <= (x.second - 1) / SECTOR; s++)
                    if (secs.empty() || secs.back() != s) secs.push_back(s);
            }
            std::sort(secs.begin(), secs.end());
            secs.erase(std::unique(secs.begin(), secs.end()), secs.end());
            launch.warp_loads++;
            launch.sectors += secs.size();
            launch.min_sectors += (distinct + SECTOR - 1) / SECTOR;
        }
        warps.clear();
        seen.clear();
    }

    void kernelEnd(const oclgrind::KernelInvocation *) override {
        const char *path = getenv("CLINFER_COST_OUT");
        FILE *out = path ? fopen(path, "a") : stderr;
        if (!out) return;
        fprintf(out,
                "{\"kernel\": \"%s\", \"global\": [%zu, %zu, %zu], \"local\": [%zu, %zu, %zu], "
                "\"groups\": %zu, \"insts\": %llu, \"max_item_insts\": %llu, \"load_bytes\": %llu, "
                "\"unique_bytes\": %llu, \"store_bytes\": %llu, \"local_load_bytes\": %llu, "
                "\"warp_loads\": %llu, \"sectors\": %llu, \"min_sectors\": %llu}\n",
                launch.kernel.c_str(), launch.global[0], launch.global[1], launch.global[2],
                launch.local[0], launch.local[1], launch.local[2], launch.groups, launch.insts,
                launch.max_item_insts, launch.load_bytes,
                (unsigned long long)(launch.touched.size() * SECTOR), launch.store_bytes,
                launch.local_load_bytes, launch.warp_loads, launch.sectors, launch.min_sectors);
        if (out != stderr) fclose(out);
    }

  private:
    size_t linear(const oclgrind::WorkItem *wi) const {
        oclgrind::Size3 l = wi->getLocalID();
        return l.x + launch.local[0] * (l.y + launch.local[1] * l.z);
    }

    Launch launch;
    std::vector<unsigned long long> item_insts;       // per item of the current group
    std::unordered_map<Key, size_t, KeyHash> seen;    // (inst, item): executions so far
    std::unordered_map<Key, WarpLoad, KeyHash> warps; // (inst, n-th, warp): its ranges
};

CostModel *plugin;

} // namespace

extern "C" void initializePlugins(oclgrind::Context *context) {
    plugin = new CostModel(context);
    context->registerPlugin(plugin);
}

extern "C" void releasePlugins(oclgrind::Context *context) {
    context->unregisterPlugin(plugin);
    delete plugin;
    plugin = nullptr;
}
