package fatbin

import (
	"fmt"
	"strings"
)

// ncclKernelPrefix names NCCL's collective kernels (ncclDevKernel_AllReduce_..., mangled
// _Z..ncclDevKernel_...), the ones that call the device hook; NCCL's other
// kernels (symmetric ones among them) do not.
const ncclKernelPrefix = "ncclDevKernel"

// HookCallers are the kernels of ks that call the device hook: NCCL's
// ncclDevKernel* kernels where there are any, else every kernel (a library
// that is not NCCL but exports ncclProfilerDevFuncName may call it from any).
func HookCallers(ks []Kernel) []Kernel {
	var nccl []Kernel
	for _, k := range ks {
		if strings.Contains(k.Name, ncclKernelPrefix) {
			nccl = append(nccl, k)
		}
	}
	if len(nccl) > 0 {
		return nccl
	}
	return ks
}

// Budget is what the kernels that call the hook allow it: the fewest
// registers and the smallest stack among them.
type Budget struct {
	Kernels                    int
	MinRegisters, MaxRegisters int
	MinStack, MaxStack         int    // bytes
	Fewest                     string // a kernel with MinRegisters
}

// BudgetOf sums up ks (Kernels 0 when ks is empty).
func BudgetOf(ks []Kernel) Budget {
	var b Budget
	for i, k := range ks {
		if i == 0 || k.Registers < b.MinRegisters {
			b.MinRegisters, b.Fewest = k.Registers, k.Name
		}
		if i == 0 || k.StackBytes < b.MinStack {
			b.MinStack = k.StackBytes
		}
		b.MaxRegisters = max(b.MaxRegisters, k.Registers)
		b.MaxStack = max(b.MaxStack, k.StackBytes)
	}
	b.Kernels = len(ks)
	return b
}

// String says it as the plugin's INFO line does: "312 kernels call the
// hook, 96 registers each, stack 552-792 B".
func (b Budget) String() string {
	s := fmt.Sprintf("%d kernels call the hook", b.Kernels)
	if b.Kernels == 1 {
		s = "1 kernel calls the hook"
	}
	if b.MinRegisters == b.MaxRegisters {
		s += fmt.Sprintf(", %d registers each", b.MinRegisters)
	} else {
		s += fmt.Sprintf(", %d-%d registers (fewest: %s)", b.MinRegisters, b.MaxRegisters, b.Fewest)
	}
	if b.MinStack == b.MaxStack {
		return s + fmt.Sprintf(", stack %d B", b.MinStack)
	}
	return s + fmt.Sprintf(", stack %d-%d B", b.MinStack, b.MaxStack)
}
