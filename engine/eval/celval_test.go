package eval

import (
	"math"
	"testing"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// TestCelValScalars: celVal's direct string forms of the scalars are the
// ones the general path (native, then stringOf) gives, so that bindings,
// group keys and task keys built from computed values do not change.
func TestCelValScalars(t *testing.T) {
	vals := []ref.Val{
		types.String(""), types.String("node-1"), types.String("a\x00b"),
		types.Int(0), types.Int(-1), types.Int(99), types.Int(100), types.Int(255), types.Int(256), types.Int(1 << 40),
		types.Int(math.MinInt64), types.Int(math.MaxInt64),
		types.Double(0), types.Double(math.Copysign(0, -1)), types.Double(0.1), types.Double(-2.5), types.Double(1e21),
		types.Double(1e-7), types.Double(12345.678), types.Double(math.Inf(1)), types.Double(math.Inf(-1)), types.Double(math.NaN()),
		types.Bool(true), types.Bool(false),
	}
	for _, v := range vals {
		n, err := native(v)
		if err != nil {
			t.Fatalf("native(%v): %v", v, err)
		}
		want := stringOf(n)
		got := celVal(v)
		if got.str != want {
			t.Errorf("celVal(%T %v).str = %q, the general path gives %q", v, v, got.str, want)
		}
		same := got.cel == v
		if d, ok := v.(types.Double); ok && math.IsNaN(float64(d)) {
			gd, ok := got.cel.(types.Double)
			same = ok && math.IsNaN(float64(gd))
		}
		if !same {
			t.Errorf("celVal(%T %v).cel = %v, want the value itself", v, v, got.cel)
		}
	}
	// The others still take the general path.
	d := types.Duration{Duration: 90 * time.Second}
	if got := celVal(d); got.str != "1m30s" {
		t.Errorf("celVal(duration 90s).str = %q, want 1m30s", got.str)
	}
}
