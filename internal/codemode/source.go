package codemode

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// The code is the body of an async arrow function; the prefix stays on the
// code's first line so line numbers are the code's own.
const (
	srcName = "code.js"
	prefix  = "(async () => {"
	suffix  = "\n})()"
	// guardName is the global the rewritten code calls around the operand
	// of an object spread or a for-in (see the prelude). Code may not use
	// the name itself.
	guardName = "__codemode_guard__"
)

var astPkg = reflect.TypeOf(ast.Program{}).PkgPath()

// insertion is text to insert at an offset of the wrapped source.
type insertion struct {
	off   int
	text  string
	close bool // closing text goes before opening text at the same offset
}

// prepare parses and checks the code and compiles it. It rewrites the
// code in two ways, both checked by parsing the result again: the last
// expression statement becomes a return (so its value is the final value),
// and the operand of every object spread and for-in goes through the guard
// that refuses to turn a huge string into one property per character.
func prepare(code string) (*goja.Program, *srcMap, error) {
	src := prefix + code + suffix
	prg, err := parse(src, code)
	if err != nil {
		return nil, nil, err
	}
	body, err := wrapperBody(prg)
	if err != nil {
		return nil, nil, err
	}
	var ins []insertion
	var bad error
	visit(prg, func(v reflect.Value) {
		if bad != nil {
			return
		}
		switch n := v.Interface().(type) {
		case *ast.NumberLiteral:
			if _, ok := n.Value.(*big.Int); ok {
				bad = fmt.Errorf("SyntaxError: BigInt is not available in code mode (%s)", lineOf(src, int(n.Idx)-1))
			}
		case *ast.Identifier:
			if strings.HasPrefix(string(n.Name), "__codemode") {
				bad = fmt.Errorf("SyntaxError: the name %s is reserved in code mode (%s)", n.Name, lineOf(src, int(n.Idx)-1))
			}
		case ast.Identifier:
			if strings.HasPrefix(string(n.Name), "__codemode") {
				bad = fmt.Errorf("SyntaxError: the name %s is reserved in code mode (%s)", n.Name, lineOf(src, int(n.Idx)-1))
			}
		case *ast.ObjectLiteral:
			for _, p := range n.Value {
				if sp, ok := p.(*ast.SpreadElement); ok {
					ins = append(ins, guard(sp.Expression)...)
				}
			}
		case *ast.ForInStatement:
			ins = append(ins, guard(n.Source)...)
		case *ast.WithStatement:
			// with puts an object's properties in scope: one named like
			// the guard (a computed key, which the name check does not
			// see) took the guard's place, and a spread of a string of
			// 100 million characters ran unguarded in one native step.
			bad = fmt.Errorf("SyntaxError: with is not available in code mode (%s): name the object instead", lineOf(src, int(n.With)-1))
		}
	})
	if bad != nil {
		return nil, nil, bad
	}
	// The last statement's value is the result, when it is an expression.
	var ret []insertion
	for i := len(body.List) - 1; i >= 0; i-- {
		st := body.List[i]
		if _, empty := st.(*ast.EmptyStatement); empty {
			continue
		}
		if es, ok := st.(*ast.ExpressionStatement); ok {
			// The AST does not keep parentheses: the statement starts
			// before those that open right before its expression.
			start := int(es.Idx0()) - 1
			for j := start - 1; j >= len(prefix); j-- {
				if c := src[j]; c == '(' {
					start = j
				} else if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
					break
				}
			}
			ret = []insertion{
				{off: start, text: "return ("},
				{off: int(es.Idx1()) - 1, text: ")", close: true},
			}
		}
		break
	}
	if len(ins) == 0 && len(ret) == 0 {
		p, err := compile(prg, nil)
		return p, nil, err
	}
	for _, withReturn := range []bool{true, false} {
		all := append([]insertion(nil), ins...)
		if withReturn {
			if len(ret) == 0 {
				continue
			}
			all = append(all, ret...)
		}
		out, applied := apply(src, all)
		p2, err := parser.ParseFile(nil, srcName, out, 0, parser.WithDisableSourceMaps)
		if err != nil {
			continue
		}
		m := &srcMap{src: src, out: out, ins: applied}
		p, err := compile(p2, m)
		return p, m, err
	}
	if len(ins) == 0 {
		p, err := compile(prg, nil)
		return p, nil, err
	}
	return nil, nil, errors.New("internal error in code mode: the code could not be prepared")
}

// srcMap maps a position in the compiled source, the wrapped code with
// the rewrites' insertions (none has a newline), to the code's own: an
// error after "return (" was at a column 8 too far.
type srcMap struct {
	src, out string      // the wrapped code, and with the insertions
	ins      []insertion // as applied, in order
}

// userPos is the code's own line and column of a position in the compiled
// source (m may be nil: no insertions).
func (m *srcMap) userPos(line, col int) (int, int) {
	if m != nil && len(m.ins) > 0 {
		start, ok1 := lineStart(m.out, line)
		orig, ok2 := lineStart(m.src, line)
		if ok1 && ok2 {
			if o := m.original(start + col - 1); o >= orig {
				col = o - orig + 1
			}
		}
	}
	return userPos(line, col)
}

// original is the offset in the wrapped code of offset off of the
// compiled source; one inside an inserted text is where it was inserted.
func (m *srcMap) original(off int) int {
	shift := 0
	for _, in := range m.ins {
		pos := in.off + shift
		if off < pos {
			break
		}
		if off < pos+len(in.text) {
			return in.off
		}
		shift += len(in.text)
	}
	return off - shift
}

// lineStart is the offset where line (from 1) of s starts.
func lineStart(s string, line int) (int, bool) {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(s[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	return off, true
}

func guard(e ast.Expression) []insertion {
	if e == nil {
		return nil
	}
	return []insertion{
		{off: int(e.Idx0()) - 1, text: guardName + "(("},
		{off: int(e.Idx1()) - 1, text: "))", close: true},
	}
}

// apply inserts the texts into src; applied are those inserted, in order.
func apply(src string, ins []insertion) (out string, applied []insertion) {
	sort.SliceStable(ins, func(a, b int) bool {
		if ins[a].off != ins[b].off {
			return ins[a].off < ins[b].off
		}
		return ins[a].close && !ins[b].close
	})
	var b strings.Builder
	last := 0
	for _, in := range ins {
		if in.off < last || in.off > len(src) {
			continue
		}
		b.WriteString(src[last:in.off])
		b.WriteString(in.text)
		last = in.off
		applied = append(applied, in)
	}
	b.WriteString(src[last:])
	return b.String(), applied
}

var importRegex = regexp.MustCompile(`(^|[^\w$.])import\s*[({"'\w*]`)

// forAwaitRegex finds a for await loop, which goja does not parse.
var forAwaitRegex = regexp.MustCompile(`(^|[^\w$.])for\s*await\s*\(`)

// Hints for what goja does not offer, added to its syntax errors.
const (
	forAwaitHint = " (for await is not available in code mode: the engine has no async iteration. The code already runs in an async " +
		"function, so await works in a plain loop: for (const p of promises) { const x = await p; ... }, or " +
		"for (const x of await Promise.all(promises)) { ... })"
	asyncGenHint = " (async generators, async function*, are not available in code mode: return an array from an async function, " +
		"or yield promises from a plain function* and await each)"
)

// compile compiles the checked program; a compile-time syntax error
// (goja's "... at code.js:L:C", in the wrapped source's columns) says the
// code's own line and column, and for what goja lacks, what to write.
func compile(prg *ast.Program, m *srcMap) (*goja.Program, error) {
	p, err := goja.CompileAST(prg, false)
	if err == nil {
		return p, nil
	}
	var se *goja.CompilerSyntaxError
	if !errors.As(err, &se) {
		return nil, err
	}
	msg := "SyntaxError: " + se.Message
	if se.File != nil {
		pos := se.File.Position(se.Offset)
		line, col := m.userPos(pos.Line, pos.Column)
		msg = fmt.Sprintf("SyntaxError: Line %d:%d %s", line, col, se.Message)
	}
	if strings.Contains(se.Message, "Async generators") {
		msg += asyncGenHint
	}
	return nil, errors.New(msg)
}

// parse parses the wrapped source, turning a syntax error into a message
// about the code's own lines.
func parse(src, code string) (*ast.Program, error) {
	prg, err := parser.ParseFile(nil, srcName, src, 0, parser.WithDisableSourceMaps)
	if err == nil {
		return prg, nil
	}
	msg := err.Error()
	var list parser.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		e := list[0]
		line, col := userPos(e.Position.Line, e.Position.Column)
		msg = fmt.Sprintf("Line %d:%d %s", line, col, e.Message)
	} else {
		msg = strings.TrimPrefix(msg, srcName+": ")
	}
	msg = "SyntaxError: " + msg
	if forAwaitRegex.MatchString(code) && strings.Contains(msg, "Unexpected token await") {
		msg += forAwaitHint
	}
	if importRegex.MatchString(code) {
		msg += " (import is not available in code mode: there are no modules; the tools object is all there is)"
	}
	return nil, errors.New(msg)
}

// wrapperBody checks that the program is still the one wrapper call (code
// with unbalanced braces could close it) and returns the function body.
func wrapperBody(prg *ast.Program) (*ast.BlockStatement, error) {
	unbalanced := errors.New("SyntaxError: unbalanced braces: the code closes the function it runs in")
	if len(prg.Body) != 1 {
		return nil, unbalanced
	}
	es, ok := prg.Body[0].(*ast.ExpressionStatement)
	if !ok {
		return nil, unbalanced
	}
	call, ok := es.Expression.(*ast.CallExpression)
	if !ok || len(call.ArgumentList) != 0 {
		return nil, unbalanced
	}
	fn, ok := call.Callee.(*ast.ArrowFunctionLiteral)
	if !ok || !fn.Async {
		return nil, unbalanced
	}
	body, ok := fn.Body.(*ast.BlockStatement)
	if !ok || int(body.LeftBrace) != len(prefix) {
		return nil, unbalanced
	}
	return body, nil
}

// lineOf is "line L" for an offset of the wrapped source.
func lineOf(src string, off int) string {
	if off < 0 || off > len(src) {
		return "line ?"
	}
	return "line " + strconv.Itoa(strings.Count(src[:off], "\n")+1)
}

// visit calls f on every node of the AST (pointers to ast structs and
// ast.Identifier values), each once.
func visit(root any, f func(reflect.Value)) {
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Pointer:
			if v.IsNil() || v.Type().Elem().PkgPath() != astPkg || v.Type().Elem().Kind() != reflect.Struct {
				return
			}
			if seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			if v.CanInterface() {
				f(v)
			}
			walk(v.Elem())
		case reflect.Struct:
			if v.Type().PkgPath() != astPkg {
				return
			}
			if v.Type() == reflect.TypeOf(ast.Identifier{}) {
				if v.CanInterface() {
					f(v)
				}
				return
			}
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(root))
}
