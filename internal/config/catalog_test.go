package config

import (
	"reflect"
	"testing"

	"github.com/ncclhooks/ncclhooks/internal/abi"
)

// The catalogue's event values are the members of ncclProfilerDevEvent_t
// (abi's Go twin, by C name), with their unsigned types.
func TestCatalogEventsAreTheABI(t *testing.T) {
	members := map[string]reflect.StructField{}
	ty := reflect.TypeFor[abi.DevEvent]()
	for i := range ty.NumField() {
		f := ty.Field(i)
		members[f.Tag.Get("c")] = f
	}
	for _, e := range Catalog {
		if e.Kind != KindEvent {
			continue
		}
		f, ok := members[e.Name]
		switch {
		case !ok:
			t.Errorf("catalogue event value %s is no member of ncclProfilerDevEvent_t", e.Name)
		case e.Type.IsSigned() || e.Type.IsFloat() || uintptr(e.Type.Bytes()) != f.Type.Size():
			t.Errorf("catalogue event value %s is %s; the member is %s", e.Name, e.Type, f.Type)
		}
		delete(members, e.Name)
	}
	for name := range members {
		if name != "rsvd" {
			t.Errorf("ncclProfilerDevEvent_t member %s is not in the catalogue", name)
		}
	}
}
