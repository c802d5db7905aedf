package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/mortarfs/mortar/"

// Every package's imports of the module's packages point down the stack
// (or across: same rank), but for the listed debts.
func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]map[string]bool{} // package -> module packages it imports (non-test files)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		pkg := filepath.ToSlash(dir)
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if dep, ok := strings.CutPrefix(path, module); ok {
				imports[pkg][dep] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(imports) < 20 {
		t.Fatalf("found %d packages under %s: not the module's root?", len(imports), root)
	}
	used := map[[2]string]bool{}
	for pkg, deps := range imports {
		r, ok := Ranks[pkg]
		if !ok {
			t.Errorf("package %s has no place in Ranks (internal/layering): put it where its job is", pkg)
			continue
		}
		for dep := range deps {
			dr, ok := Ranks[dep]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no place in Ranks", pkg, dep)
			case dr > r && Debts[[2]string{pkg, dep}] != "":
				used[[2]string{pkg, dep}] = true
			case dr > r:
				t.Errorf("%s (rank %d) imports %s (rank %d): an import up the stack", pkg, r, dep, dr)
			}
		}
	}
	for d := range Debts {
		if !used[d] {
			t.Errorf("the debt %s -> %s is paid: take it out of Debts", d[0], d[1])
		}
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module's root: %v", root, err)
	}
}
