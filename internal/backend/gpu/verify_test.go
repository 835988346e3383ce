package gpu

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

func readCubin(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEntryResources(t *testing.T) {
	for _, tc := range []struct {
		cubin     string
		regs      int
		frame     bool
		calls     string
		addresses string
	}{
		{cubin: "ok.cubin", regs: 24},
		{cubin: "div.cubin", frame: true, calls: "a subroutine (a compiler helper folded into the hook)"},
		{cubin: "glob.cubin", regs: 24, addresses: "ncclhooks_ctl"},
		{cubin: "regs.cubin", regs: 128, frame: true},
	} {
		r, err := EntryResources(readCubin(t, tc.cubin))
		if err != nil {
			t.Fatalf("%s: %v", tc.cubin, err)
		}
		if tc.regs != 0 && r.Registers != tc.regs {
			t.Errorf("%s: %d registers, want %d", tc.cubin, r.Registers, tc.regs)
		}
		if (r.FrameBytes > 0) != tc.frame {
			t.Errorf("%s: frame %d bytes, want a frame: %v", tc.cubin, r.FrameBytes, tc.frame)
		}
		if got := strings.Join(r.Calls, ","); got != tc.calls {
			t.Errorf("%s: calls %q, want %q", tc.cubin, got, tc.calls)
		}
		if got := strings.Join(r.Addresses, ","); got != tc.addresses {
			t.Errorf("%s: addresses %q, want %q", tc.cubin, got, tc.addresses)
		}
		t.Logf("%s: %v", tc.cubin, r)
	}
}

func TestResourcesCheck(t *testing.T) {
	ok, err := EntryResources(readCubin(t, "ok.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.Check(MinRegisterBudget); err != nil {
		t.Errorf("a 24-register leaf hook is refused at budget %d: %v", MinRegisterBudget, err)
	}
	for name, want := range map[string][]string{
		"div.cubin":  {"stack frame", "calls a subroutine"},
		"glob.cubin": {"addresses the module symbol ncclhooks_ctl"},
		"regs.cubin": {"needs 128 registers, over the budget of 96", "stack frame"},
	} {
		r, err := EntryResources(readCubin(t, name))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Check(DefaultRegisterBudget)
		var ue *UnsafeError
		if !errors.As(err, &ue) {
			t.Fatalf("%s: Check = %v, want an *UnsafeError", name, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, err, w)
			}
		}
	}
	if err := ok.Check(MinRegisterBudget - 1); err == nil || !strings.Contains(err.Error(), "needs 24 registers, over the budget of 23") {
		t.Errorf("budget below the hook's registers: %v", err)
	}
}

func TestEntryResourcesRefusesOtherELF(t *testing.T) {
	if _, err := EntryResources([]byte("not an elf")); err == nil {
		t.Error("garbage accepted")
	}
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	if _, err := EntryResources(exe); err == nil {
		t.Errorf("a host executable: %v", err)
	}
}

func TestRegisterCaps(t *testing.T) {
	for budget, want := range map[int]string{96: "24 32 40 48 56 64 72 80 88 96", 40: "24 32 40", 24: "24", 30: "24 30"} {
		var got []string
		for _, c := range registerCaps(budget) {
			got = append(got, strconv.Itoa(c))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("registerCaps(%d) = %v, want %s", budget, got, want)
		}
	}
}

// The reload switch's one call through a pointer relocates its return
// address as a call to a folded helper does: CheckSwitch lets exactly one
// such call through, and refuses a second (a helper the compiler added).
// div.cubin's entry has one call (its division's slow path) and a frame.
func TestCheckSwitchAllowsItsOneCall(t *testing.T) {
	r, err := EntryResources(readCubin(t, "div.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	if r.ReturnAddresses != 1 {
		t.Fatalf("div.cubin: %d return addresses, want 1 (one call)", r.ReturnAddresses)
	}
	if err := CheckSwitch(r, DefaultRegisterBudget, true); err != nil {
		t.Errorf("one call and a frame the harness allows: %v", err)
	}
	if err := CheckSwitch(r, DefaultRegisterBudget, false); err == nil || !strings.Contains(err.Error(), "stack frame") || strings.Contains(err.Error(), "calls") {
		t.Errorf("one call and a frame, for NCCL's kernels: %v, want the frame refused and the call not", err)
	}
	two := r
	two.ReturnAddresses = 2
	if err := CheckSwitch(two, DefaultRegisterBudget, true); err == nil || !strings.Contains(err.Error(), "calls a subroutine") {
		t.Errorf("two calls: %v, want the second refused", err)
	}
	if r.Calls[0] != subroutineCall {
		t.Errorf("CheckSwitch changed its argument's calls: %q", r.Calls)
	}
	ok, err := EntryResources(readCubin(t, "ok.cubin"))
	if err != nil {
		t.Fatal(err)
	}
	if ok.ReturnAddresses != 0 {
		t.Errorf("ok.cubin: %d return addresses, want 0", ok.ReturnAddresses)
	}
}

// The switch as nvcc 13.0 builds it on the H100 (testdata/README.md): its
// one call through a pointer is let through, its frame only under the
// harness.
func TestSwitchCubinFixture(t *testing.T) {
	if src := string(readCubin(t, "switch.cu")); src != SwitchSource() {
		t.Fatalf("testdata/switch.cu is not SwitchSource(): write it again and rebuild switch.cubin from it (testdata/README.md)")
	}
	r, err := FunctionResources(readCubin(t, "switch.cubin"), SymSwitch)
	if err != nil {
		t.Fatal(err)
	}
	if r.ReturnAddresses != 1 || r.FrameBytes != 16 || r.Registers != 24 {
		t.Errorf("switch.cubin: %v, %d return addresses; want 24 registers, a 16-byte frame, 1 return address", r, r.ReturnAddresses)
	}
	if err := CheckSwitch(r, DefaultRegisterBudget, true); err != nil {
		t.Errorf("under the harness: %v", err)
	}
	if err := CheckSwitch(r, DefaultRegisterBudget, false); err == nil || strings.Contains(err.Error(), "calls") {
		t.Errorf("for NCCL's kernels: %v, want the frame refused, and only the frame", err)
	}
}
