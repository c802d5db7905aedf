package options

import (
	"strings"
	"testing"
)

// Every option's default passes its own check, and every key is listed
// once.
func TestDefaultsPassTheirChecks(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range Known() {
		if seen[o.Key] {
			t.Errorf("%s listed twice", o.Key)
		}
		seen[o.Key] = true
		if o.Default == "" {
			continue // unset means the layer's own (quorum-count: none)
		}
		if err := Check(o.Key, o.Default); err != nil {
			t.Errorf("default of %s: %v", o.Key, err)
		}
		if Default(o.Key) != o.Default || !IsKnown(o.Key) {
			t.Errorf("%s: Default %q IsKnown %v", o.Key, Default(o.Key), IsKnown(o.Key))
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, kv := range [][2]string{{OptPingTimeout, "0"}, {OptQuickRead, "maybe"}, {"no.such", "x"}, {OptStorageReserve, "lots"}} {
		if err := Check(kv[0], kv[1]); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("Check(%s, %s): %v", kv[0], kv[1], err)
		}
	}
}
