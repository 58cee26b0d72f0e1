package codemode

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// convertShared is the length of the string every case's object holds in
// convertProps properties: the message goja makes holds it each time.
const (
	convertShared = 256 << 10
	convertProps  = 8
)

// The limit doc.go describes, pinned: goja's TypeError for an object it
// cannot convert to a primitive formats the Go struct behind the object
// (%v) in one native step, with every string the object holds itself,
// a shared one once per property (non-ASCII at four bytes a character).
// Neither the interrupt nor MaxMemory can stop that step: with the
// default limits, 64 properties holding one string of 64 Mi characters
// made goja format 4 GiB, and the test binary under ulimit -v 3000000
// died with "fatal error: out of memory" (the whole worker, every job on
// it). Nothing in this package converts a script value in Go (every Go
// function the prelude gets takes a goja.FunctionCall and is handed
// strings the prelude made), so what reaches it is the code's own
// conversions ("" + o, String(o), x[o], o(), a built-in's argument) of
// such objects. If this test fails, goja bounds its message now: take the
// limit out of doc.go and docs/RELIABILITY.md.
func TestConversionErrorHoldsTheObjectsStrings(t *testing.T) {
	t.Parallel()
	// fill puts the string v (s by default) in P properties of o; size
	// prints what the code sees of f's error and returns its message's
	// length.
	pre := "const N = " + strconv.Itoa(convertShared) + ", P = " + strconv.Itoa(convertProps) + `;
const s = "x".repeat(N), fill = (o, v = s) => { for (let i = 0; i < P; i++) o["k" + i] = v; return o; };
const size = (f) => { try { f(); } catch (e) { console.log(e); return e.message.length; } return -1; };
`
	for _, tt := range []struct {
		name, code string
		perChar    int // bytes of the message per character held
	}{
		{"null prototype", `size(() => "" + fill(Object.create(null)))`, 1},
		{"null prototype literal", `size(() => String(fill({__proto__: null})))`, 1},
		{"toString and valueOf returning objects", `size(() => "" + fill({toString() { return {}; }, valueOf() { return {}; }}))`, 1},
		{"no callable conversion", `size(() => "" + fill({[Symbol.toPrimitive]: undefined, toString: 0, valueOf: 0}))`, 1},
		{"array with a null prototype", `size(() => "" + Object.setPrototypeOf(new Array(P).fill(s), null))`, 1},
		{"not ASCII", `size(() => "" + fill(Object.create(null), "\u00e9".repeat(N)))`, 4},
		{"property key", `size(() => ({})[fill(Object.create(null))])`, 1},
		{"called", `size(() => fill(Object.create(null))())`, 1},
		{"prototype of a class extending null", `class C extends null {}; size(() => "" + fill(C.prototype))`, 1},
		{"a Proxy as prototype", `size(() => "" + fill(Object.create(new Proxy({}, {get: () => undefined}))))`, 1},
		{"RegExp match groups", `size(() => "" + new RegExp(Array.from({length: P}, (_, i) => "(?=(?<k" + i + ">.*))").join(""), "s").exec(s).groups)`, 1},
		{"JSON.parse of it", `size(() => JSON.parse(fill(Object.create(null))))`, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), pre+tt.code, h, Limits{})
			if out.Err != nil {
				t.Fatalf("Err = %v", out.Err)
			}
			// The model reads JavaScript's words (the prelude's errorText)...
			shown, n, ok := strings.Cut(out.Text, "\n")
			if !ok || shown != "TypeError: Cannot convert object to primitive value" {
				t.Errorf("console.log(e) = %.200q", shown)
			}
			// ...but goja made a message holding every property's string.
			got, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("Text = %.200q", out.Text)
			}
			if want := tt.perChar * convertShared * convertProps; got < want {
				t.Errorf("the message is %d bytes, under the %d the object's strings make: has goja bounded it?", got, want)
			}
		})
	}
}
