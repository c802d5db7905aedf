package layer

import "testing"

// A record reads back as written, Refused or not; anything else is not a
// record (a brick refuses to store it).
func TestRenameRecordRoundTrip(t *testing.T) {
	for _, r := range []RenameRecord{{From: "/a/f", To: "/b/g"}, {From: "/a/f", To: "/b/g", Refused: true}} {
		if got, ok := ParseRenameRecord(r.Encode()); !ok || got != r {
			t.Errorf("%+v read back as %+v, %v", r, got, ok)
		}
	}
	for _, bad := range []string{"", "/a", "/a\x00b", "a\x00/b", "/a\x00/b\x00maybe", "/a\x00/b\x00refused\x00x"} {
		if r, ok := ParseRenameRecord([]byte(bad)); ok {
			t.Errorf("%q read as a record: %+v", bad, r)
		}
	}
}
