package bench

import (
	"context"
	"os/exec"
	"testing"
)

// sqliteRun makes its commits in a real sqlite3 and checks the database
// it leaves: n rows, integrity ok, WAL mode.
func TestSQLiteRun(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Fatal("sqlite3 is not installed (scripts/test installs it)")
	}
	rate, err := sqliteRun(context.Background(), t.TempDir(), 50)
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Fatalf("rate %v, want > 0", rate)
	}
}
