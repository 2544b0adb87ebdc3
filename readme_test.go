package netio_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The README's echo program is Example's body in func main, with the
// imports that body needs: Example compiles and runs with checked output,
// so the program a new user copies from the README does too.
func TestREADMEEchoIsExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	prog := goBlock(t, readme, "package main")
	main, mainFile, mainSrc := funcBody(t, "README.md", prog, "main")

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example, exampleFile, _ := funcBody(t, "example_test.go", src, "Example")
	if i := strings.Index(example, "// Output:"); i >= 0 {
		example = example[:i]
	}
	if got, want := strings.TrimSpace(main), strings.TrimSpace(example); got != want {
		t.Errorf("README.md's func main is not the body of Example in example_test.go:\n--- README\n%s\n--- Example\n%s", got, want)
	}

	// Every import of the README is used by main, under the path
	// example_test.go gives the name, and everything main uses is imported.
	used := packagesUsed(mainSrc)
	exampleImports := importsByName(t, exampleFile)
	for name, path := range importsByName(t, mainFile) {
		if !used[name] {
			t.Errorf("README.md imports %q but its program does not use it", path)
		}
		if want := exampleImports[name]; path != want {
			t.Errorf("README.md imports %s as %q, example_test.go as %q", name, path, want)
		}
		delete(used, name)
	}
	for name := range used {
		if _, ok := exampleImports[name]; ok {
			t.Errorf("README.md's program uses %s without importing it", name)
		}
	}
}

// goBlock returns the first ```go block of md that contains marker.
func goBlock(t *testing.T, md []byte, marker string) []byte {
	t.Helper()
	for rest := md; ; {
		_, after, ok := bytes.Cut(rest, []byte("```go\n"))
		if !ok {
			t.Fatalf("no ```go block containing %q", marker)
		}
		block, tail, ok := bytes.Cut(after, []byte("```"))
		if !ok {
			t.Fatal("unterminated ```go block")
		}
		if bytes.Contains(block, []byte(marker)) {
			return block
		}
		rest = tail
	}
}

// funcBody parses src and returns the text between the braces of the
// function named name, the file, and the function's body as syntax.
func funcBody(t *testing.T, filename string, src []byte, name string) (string, *ast.File, *ast.BlockStmt) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filename, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name && fd.Recv == nil {
			open, end := fset.Position(fd.Body.Lbrace).Offset, fset.Position(fd.Body.Rbrace).Offset
			return string(src[open+1 : end]), f, fd.Body
		}
	}
	t.Fatalf("%s: no func %s", filename, name)
	return "", nil, nil
}

// packagesUsed returns the names x of the selectors x.y in body.
func packagesUsed(body ast.Node) map[string]bool {
	used := map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok {
				used[x.Name] = true
			}
		}
		return true
	})
	return used
}

// importsByName maps each import's name in f to its path.
func importsByName(t *testing.T, f *ast.File) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		m[name] = path
	}
	return m
}
