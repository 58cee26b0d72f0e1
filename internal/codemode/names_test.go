package codemode

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// namedTools is a catalog whose tool names are JavaScript's own words:
// reserved words, Object.prototype's members, the names a runtime reads
// on any object by itself (then, toString, ...), and names that are no
// identifier. Each tool answers {"tool": NAME}.
func namedTools() (*Catalog, *fakeHost, []string) {
	names := []string{"then", "toString", "valueOf", "toJSON", "toLocaleString", "then_",
		"delete", "class", "constructor", "__proto__", "hasOwnProperty", "prototype",
		"get-sum", "a.b", "café", "日本", "x y", "123", "echo"}
	h := &fakeHost{tools: map[string]func(map[string]any) (Result, error){}}
	var ts []Tool
	for _, n := range names {
		b, _ := json.Marshal(map[string]string{"tool": n})
		h.tools[n] = func(map[string]any) (Result, error) { return Result{Text: string(b)}, nil }
		ts = append(ts, Tool{Name: n, Description: "The " + n + " tool."})
	}
	return NewCatalog(ts), h, names
}

// implicitNames are the names of namedTools that a runtime reads on an
// object by itself.
var implicitNames = map[string]bool{"then": true, "toString": true, "valueOf": true, "toJSON": true, "toLocaleString": true}

// A tool named then made tools a thenable: `await tools` and `return
// tools` handed the promise machinery's resolve function to the tool
// wrapper (a TypeError, or with another name, a call). Tools with the
// names a runtime reads on any object by itself are tools.NAME_, and
// tools.then stays undefined; awaiting, returning, printing and
// converting tools calls no tool.
func TestImplicitNamesDoNotMakeToolsAThenable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, code, want string }{
		{"await tools", `const t = await tools; t === tools`, "true"},
		{"return tools", `return tools`, ""},
		{"Promise.resolve", `(await Promise.resolve(tools)) === tools`, "true"},
		{"async function returning tools", `const f = async () => tools; (await f()) === tools`, "true"},
		{"then is undefined", `[typeof tools.then, typeof tools["then"], "then" in tools]`, `["undefined","undefined",false]`},
		{"conversions", `let r = []; for (const f of [() => String(tools), () => tools + "", () => JSON.stringify(tools), () => [tools].toLocaleString()]) { try { r.push(typeof f()) } catch (e) { r.push(e.name) } }; r`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cat, h, _ := namedTools()
			out := cat.Run(context.Background(), tc.code, h, Limits{})
			if out.Err != nil {
				t.Fatalf("Err = %v", out.Err)
			}
			if tc.want != "" && out.Text != tc.want {
				t.Errorf("Text = %q, want %q", out.Text, tc.want)
			}
			if calls := h.recorded(); len(calls) != 0 {
				t.Errorf("the code called no tool, the host got %v", calls)
			}
		})
	}
}

// Every tool is callable under the identifier the index and the
// declarations give it, and its name (when that is no identifier) reaches
// it too, except for the implicit names.
func TestEveryToolNameIsCallable(t *testing.T) {
	t.Parallel()
	cat, h, names := namedTools()
	decl := cat.Declarations()
	index := cat.Index(0)
	var code strings.Builder
	code.WriteString("const r = [];\n")
	for _, n := range names {
		id, ok := cat.Ident(n)
		if !ok {
			t.Fatalf("no identifier for %q", n)
		}
		if implicitNames[n] && id == n {
			t.Errorf("tool %q kept its name as identifier", n)
		}
		if !strings.Contains(decl, "  "+id+"(args?: ") {
			t.Errorf("declarations have no method %s for %q:\n%s", id, n, decl)
		}
		if !strings.Contains(index, id+"(): The "+n+" tool.") {
			t.Errorf("index has no line for %s (%q):\n%s", id, n, index)
		}
		if implicitNames[n] && !strings.Contains(decl, "call it as tools."+id+" (tools."+n+" is undefined") {
			t.Errorf("declarations do not say how to call %q:\n%s", n, decl)
		}
		b, _ := json.Marshal(id)
		code.WriteString("r.push((await tools[" + string(b) + "]({})).tool);\n")
		if id != n && !implicitNames[n] {
			b, _ := json.Marshal(n)
			code.WriteString("r.push((await tools[" + string(b) + "]({})).tool);\n")
		}
	}
	code.WriteString("return r;")
	out := cat.Run(context.Background(), code.String(), h, Limits{})
	if out.Err != nil {
		t.Fatalf("Err = %v", out.Err)
	}
	var got []string
	if err := json.Unmarshal([]byte(out.Text), &got); err != nil {
		t.Fatalf("%v: %q", err, out.Text)
	}
	var want []string
	for _, n := range names {
		want = append(want, n)
		if id, _ := cat.Ident(n); id != n && !implicitNames[n] {
			want = append(want, n)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("tools called:\n got %q\nwant %q", got, want)
	}
	for i, c := range h.recorded() {
		if c.Name != got[i] {
			t.Errorf("host call %d went to %q, the code got %q", i, c.Name, got[i])
		}
	}
}
