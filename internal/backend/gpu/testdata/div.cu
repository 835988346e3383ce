// A hook that divides with the compiler's division: a call to its slow path, and a frame.
extern "C" __device__ void ncclhooks_entry(const void* ev, void* ctx) {
  double* d = (double*)ctx; d[0] = d[1] / d[2];
}
typedef void (*hook_t)(const void*, void*);
extern "C" __device__ hook_t ncclhooks_entry_ptr = ncclhooks_entry;
