package config

// devicefuncs.go holds what an expression may use on the device: the function whitelist, the binary
// operators and the operators of name predicates.

import (
	"strings"
)

// DeviceFunc is an expr-lang builtin the device implements.
type DeviceFunc struct {
	Name string
	Args int // the number of arguments it takes in a profile
}

// DeviceFuncs is the device whitelist of functions, in the order messages
// list them: the validator accepts these and no other, and hookgen
// translates each of them and refuses every other (hookgen's tests hold
// both). bitnand(a, b) is a &^ b.
var DeviceFuncs = []DeviceFunc{
	{"abs", 1}, {"min", 2}, {"max", 2},
	{"bitand", 2}, {"bitor", 2}, {"bitxor", 2}, {"bitnand", 2}, {"bitnot", 1},
	{"bitshl", 2}, {"bitshr", 2}, {"bitushr", 2},
}

// LookupDeviceFunc returns the whitelist's entry for name.
func LookupDeviceFunc(name string) (DeviceFunc, bool) {
	for _, f := range DeviceFuncs {
		if f.Name == name {
			return f, true
		}
	}
	return DeviceFunc{}, false
}

// deviceBuiltinList names the whitelist for messages.
var deviceBuiltinList = func() string {
	names := make([]string, len(DeviceFuncs))
	for i, f := range DeviceFuncs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}()

// deviceOperators are the expr-lang binary operators over numbers and
// booleans the device implements.
var deviceOperators = map[string]bool{
	"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true,
	"&&": true, "and": true, "||": true, "or": true,
	"+": true, "-": true, "*": true, "/": true, "%": true,
}

// funcPredOps are the operators of name predicates.
var funcPredOps = map[string]FuncPredOp{
	"matches": FuncMatches, "startsWith": FuncStartsWith, "endsWith": FuncEndsWith,
	"contains": FuncContains, "==": FuncEquals, "in": FuncIn,
}

const funcOnlyInPreds = `func can only be used in name predicates: func matches "re", func startsWith "s", func endsWith "s", func contains "s", func == "s", func in ["a", "b"]`
