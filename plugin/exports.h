// The plugin's C glue: the exported ncclProfiler_v7/v6/v5 structs (their
// types, NCCL's logger and log levels come from abi/ncclhooks_abi.h) and the
// C helpers the Go side calls.
#ifndef NCCLHOOKS_EXPORTS_H
#define NCCLHOOKS_EXPORTS_H

#include "ncclhooks_abi.h"

void hooks_log(int level, const char* msg);
const char* hooks_func_name(int funcId);
int hooks_harness_present(void);

#endif
