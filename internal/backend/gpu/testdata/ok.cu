// A hook that is safe for any relocatable caller with 24 registers or more.
extern "C" __device__ void ncclhooks_entry(const void* ev, void* ctx) { atomicAdd((unsigned long long*)ctx, 1ULL); }
typedef void (*hook_t)(const void*, void*);
extern "C" __device__ hook_t ncclhooks_entry_ptr = ncclhooks_entry;
