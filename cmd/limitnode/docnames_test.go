package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsNameWhatExists reads README.md and every page of docs/ for the
// code they name in backticks, and fails on a name that is not in the
// tree, so that a moved file or a renamed function cannot leave the docs
// behind:
//   - a path in one of the repository's own directories (`cluster/allow.go`,
//     `fsm/`) must exist, and a Go file named alone (`allow.go`) must be
//     in some directory;
//   - a Go name qualified by one of the module's packages (`fsm.EffectOf`,
//     `cluster.Config.DenyLeaseCap`, `denylease.Grants`) must be declared in
//     that package: a function, type, method, field, constant or variable;
//   - a relative link ([text](../cluster/allow.go)) must reach a file;
//   - the names in parentheses right after a Go file (`cluster/allow.go`
//     (`decide`, `pending`)) must be declared in that file.
func TestDocsNameWhatExists(t *testing.T) {
	t.Parallel()
	tree := readModule(t)
	pages := []string{filepath.Join(repoRoot, "README.md")}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, more...)
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, page)
		t.Run(rel, func(t *testing.T) {
			for _, bad := range tree.missingIn(string(data)) {
				t.Errorf("%s names %s", rel, bad)
			}
			for _, link := range relativeLink.FindAllStringSubmatch(withoutCodeBlocks(string(data)), -1) {
				target := filepath.Join(filepath.Dir(page), filepath.FromSlash(link[1]))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, link[1])
				}
			}
		})
	}
}

// moduleNames is what the module declares: by package name (the last
// element of its directory; several directories may share one), and by
// Go file, relative to the repository's root.
type moduleNames struct {
	topDirs   map[string]bool
	byPackage map[string]map[string]bool
	byFile    map[string]map[string]bool
}

// readModule parses every Go file of the module (tests included: some
// docs name a test or a benchmark).
func readModule(t *testing.T) *moduleNames {
	t.Helper()
	m := &moduleNames{topDirs: map[string]bool{}, byPackage: map[string]map[string]bool{}, byFile: map[string]map[string]bool{}}
	entries, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			m.topDirs[e.Name()] = true
		}
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(repoRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != repoRoot) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		pkg := filepath.Base(filepath.Dir(rel))
		if f.Name.Name == "main" {
			pkg = "" // a command: no name to qualify with
		}
		if pkg != "" && m.byPackage[pkg] == nil {
			m.byPackage[pkg] = map[string]bool{}
		}
		names := map[string]bool{}
		for _, n := range declaredNames(f) {
			names[n] = true
			if pkg != "" {
				m.byPackage[pkg][n] = true
			}
		}
		m.byFile[filepath.ToSlash(rel)] = names
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// declaredNames lists a file's top-level names, each method as Type.Method
// and as Method, and each struct field as Type.Field and as Field.
func declaredNames(f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			out = append(out, d.Name.Name)
			if d.Recv != nil && len(d.Recv.List) == 1 {
				if recv := receiverType(d.Recv.List[0].Type); recv != "" {
					out = append(out, recv+"."+d.Name.Name)
				}
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					out = append(out, s.Name.Name)
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, field := range st.Fields.List {
							for _, name := range field.Names {
								out = append(out, s.Name.Name+"."+name.Name, name.Name)
							}
						}
					}
					if it, ok := s.Type.(*ast.InterfaceType); ok {
						for _, method := range it.Methods.List {
							for _, name := range method.Names {
								out = append(out, s.Name.Name+"."+name.Name, name.Name)
							}
						}
					}
				case *ast.ValueSpec:
					for _, name := range s.Names {
						out = append(out, name.Name)
					}
				}
			}
		}
	}
	return out
}

// receiverType is the name of a method's receiver type: T of T, *T,
// T[K] or *T[K].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

var (
	// inlineCode is a span of inline code in Markdown.
	inlineCode = regexp.MustCompile("`([^`\n]+)`")
	// goFileThenNames is a Go file in backticks followed by names in
	// parentheses: `dir/file.go` (`a`, `b.c`).
	goFileThenNames = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)` \\(([^()]*)\\)")
	// qualifiedName is pkg.Name or pkg.Type.Member, nothing else in the span.
	// The name is exported: an unexported one is named beside its file.
	qualifiedName = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)(?:\(\))?$`)
	// relativeLink is the target of a Markdown link that is neither a URL
	// nor an anchor on the same page, without its own anchor.
	relativeLink = regexp.MustCompile(`\]\(([^)#:\s]+)(?:#[^)]*)?\)`)
	// goName is a Go name, or Type.Member, as prose writes one (JSON's
	// snake_case fields are not).
	goName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)?$`)
	// repoPath is a relative path of the repository: no spaces, no
	// scheme, no flags.
	repoPath = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)*/?$`)
)

// missingIn lists what page names that the module does not have.
func (m *moduleNames) missingIn(page string) []string {
	var out []string
	for _, g := range inlineCode.FindAllStringSubmatch(withoutCodeBlocks(page), -1) {
		span := g[1]
		if bad := m.checkSpan(span); bad != "" && !slices.Contains(out, bad) {
			out = append(out, bad)
		}
	}
	for _, g := range goFileThenNames.FindAllStringSubmatch(withoutCodeBlocks(page), -1) {
		file, names := g[1], g[2]
		declared, ok := m.byFile[file]
		if !ok {
			continue // checkSpan reports the file itself
		}
		for _, n := range inlineCode.FindAllStringSubmatch(names, -1) {
			name := strings.TrimSuffix(n[1], "()")
			if !goName.MatchString(name) {
				continue // not a Go name: a flag, a JSON field, a value
			}
			if !declared[name] && !declared[name[strings.LastIndex(name, ".")+1:]] {
				out = append(out, "`"+name+"` in "+file+", which does not declare it")
			}
		}
	}
	return out
}

// checkSpan returns what is wrong with one span of inline code, or "".
func (m *moduleNames) checkSpan(span string) string {
	if repoPath.MatchString(span) && strings.Contains(span, "/") {
		first := strings.SplitN(span, "/", 2)[0]
		if !m.topDirs[first] {
			return "" // not a path of the repository (a route, a created directory)
		}
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(span))); err == nil {
			return ""
		}
		// dir/pkg.Name: a name in the package at dir.
		dir, name := filepath.Split(span)
		if pkg, member, ok := strings.Cut(name, "."); ok && goName.MatchString(member) {
			if m.declaredIn(dir+pkg, member) {
				return ""
			}
		}
		return "`" + span + "`, which does not exist"
	}
	if strings.HasSuffix(span, ".go") && repoPath.MatchString(span) { // a file named without its directory
		for file := range m.byFile {
			if filepath.Base(file) == span {
				return ""
			}
		}
		return "`" + span + "`, which no directory has"
	}
	if q := qualifiedName.FindStringSubmatch(span); q != nil {
		pkg, name := q[1], q[2]
		declared, ok := m.byPackage[pkg]
		if !ok {
			return "" // not one of the module's packages (slog.Info, time.Duration)
		}
		if !declared[name] && !declared[name[:strings.Index(name+".", ".")]] {
			return "`" + span + "`, which package " + pkg + " does not declare"
		}
	}
	return ""
}

// withoutCodeBlocks is page without its fenced code blocks, whose text is
// code to run, not names in prose.
func withoutCodeBlocks(page string) string {
	var b strings.Builder
	inBlock := false
	for line := range strings.SplitSeq(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// declaredIn reports whether a Go file of the package at dir declares
// name.
func (m *moduleNames) declaredIn(dir, name string) bool {
	for file, names := range m.byFile {
		if filepath.ToSlash(filepath.Dir(file)) == dir && names[name] {
			return true
		}
	}
	return false
}
