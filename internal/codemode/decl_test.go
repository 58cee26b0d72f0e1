package codemode

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDeclarations(t *testing.T) {
	t.Parallel()
	c := NewCatalog([]Tool{{
		Name:        "github-get_issue",
		Description: "Get an issue by number.\nClosed ones too.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"description": "Which issue.",
			"properties": {
				"owner": {"type": "string", "description": "Repository owner; a */ does not end the comment"},
				"number": {"type": "integer", "minimum": 1},
				"state": {"type": "string", "enum": ["open", "closed"], "default": "open"},
				"labels": {"type": "array", "items": {"type": "string"}},
				"filter": {"type": "object", "properties": {
					"since": {"type": "string", "format": "date-time", "description": "ISO time."},
					"mine": {"type": "boolean"}
				}, "required": ["mine"]},
				"x-weird key": {}
			},
			"required": ["owner", "number"]
		}`),
		OutputSchema: json.RawMessage(`{"type": "object", "properties": {"title": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", 1, true, null]}}}, "required": ["title"]}`),
	}, {
		Name:        "logging_getLogs",
		Description: "Read logs.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"level": {"enum": ["error", "warn"]}}}`),
	}})
	want := `/** Which issue. */
interface GithubGetIssueInput {
  /** Repository owner; a *\/ does not end the comment */
  owner: string;
  /** @minimum 1 */
  number: number;
  /** @default "open" */
  state?: "open" | "closed";
  labels?: string[];
  filter?: {
    /**
     * ISO time.
     * @format date-time
     */
    since?: string;
    mine: boolean;
  };
  "x-weird key"?: unknown;
}

interface GithubGetIssueOutput {
  title: string;
  tags?: ("a" | 1 | true | null)[];
}

interface LoggingGetLogsInput {
  level?: "error" | "warn";
}

declare const tools: {
  /**
   * Get an issue by number.
   * Closed ones too.
   * Tool "github-get_issue".
   */
  github_get_issue(args: GithubGetIssueInput): Promise<GithubGetIssueOutput>;
  /** Read logs. */
  logging_getLogs(args?: LoggingGetLogsInput): Promise<unknown>;
};
`
	if got := c.Declarations(); got != want {
		t.Errorf("Declarations() =\n%s\nwant\n%s", got, want)
	}
	// One tool, by name or identifier; unknown names are noted.
	one := c.Declarations("logging_getLogs", "nope")
	if !strings.HasPrefix(one, "// no tool named \"nope\"\ninterface LoggingGetLogsInput {") || strings.Contains(one, "GithubGetIssue") {
		t.Errorf("Declarations(logging_getLogs, nope) =\n%s", one)
	}
	if byID := c.Declarations("github_get_issue"); byID != c.Declarations("github-get_issue") {
		t.Errorf("by identifier differs from by name:\n%s", byID)
	}
}

// Odd schemas give some declaration, never a crash.
func TestDeclarationsOddSchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema string
		contains     []string
	}{
		{"empty", ``, []string{"interface OddInput {\n  [key: string]: unknown;\n}", "odd(args?: OddInput)"}},
		{"invalid JSON", `{"type":`, []string{"[key: string]: unknown;"}},
		{"true", `true`, []string{"[key: string]: unknown;"}},
		{"false", `false`, []string{"type OddInput = never;"}},
		{"not an object", `"string"`, []string{"type OddInput = unknown;"}},
		{"no properties", `{"type": "object", "properties": {}}`, []string{"interface OddInput {}"}},
		{"closed", `{"type": "object", "additionalProperties": false}`, []string{"interface OddInput {}"}},
		{"missing type", `{"properties": {"a": {"items": {"type": "number"}}}}`, []string{"a?: number[];"}},
		{"type list", `{"type": "object", "properties": {"a": {"type": ["integer", "null"]}}}`, []string{"a?: number | null;"}},
		{"nullable", `{"type": "object", "properties": {"a": {"type": "string", "nullable": true}}}`, []string{"a?: string | null;"}},
		{"oneOf objects", `{"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object", "properties": {"b": {"type": "number"}}}]}`,
			[]string{"type OddInput = {\n  a?: string;\n} | {\n  b?: number;\n};"}},
		{"anyOf with anything", `{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {}]}}}`, []string{"a?: unknown;"}},
		{"allOf", `{"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object", "properties": {"b": {"type": "number"}}}]}`,
			[]string{"type OddInput = {\n  a?: string;\n} & {\n  b?: number;\n};"}},
		{"local refs and a cycle", `{"type": "object", "properties": {"n": {"$ref": "#/$defs/node"}}, "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"const": "x"}}}}}`,
			[]string{"n?: {\n    next?: unknown;\n    v?: \"x\";\n  };"}},
		{"remote ref", `{"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}`, []string{"a?: unknown;"}},
		{"bad ref", `{"type": "object", "properties": {"a": {"$ref": "#/nowhere/x"}}}`, []string{"a?: unknown;"}},
		{"definitions ref", `{"type": "object", "properties": {"a": {"$ref": "#/definitions/s"}}, "definitions": {"s": {"type": "string"}}}`, []string{"a?: string;"}},
		{"tuple draft 7", `{"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}, {"type": "boolean"}]}}}`, []string{"a?: [string, boolean];"}},
		{"array of unions", `{"type": "object", "properties": {"a": {"type": "array", "items": {"type": ["string", "number"]}}}}`, []string{"a?: (string | number)[];"}},
		{"array without items", `{"type": "object", "properties": {"a": {"type": "array"}}}`, []string{"a?: unknown[];"}},
		{"unknown type", `{"type": "object", "properties": {"a": {"type": "file"}}}`, []string{"a?: unknown;"}},
		{"pattern properties", `{"type": "object", "patternProperties": {"^x": {"type": "string"}}}`, []string{"[key: string]: unknown;"}},
		{"required that is not listed", `{"type": "object", "required": ["ghost"], "properties": {}}`, []string{"odd(args: OddInput)"}},
		{"deep nesting", strings.Repeat(`{"type": "object", "properties": {"a": `, 30) + `{"type": "string"}` + strings.Repeat(`}}`, 30), []string{"a?: unknown;"}},
		{"too deep to decode", strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300), []string{"[key: string]: unknown;"}},
		{"enum of odd values", `{"type": "object", "properties": {"a": {"enum": [{"x": 1}, [1], 1.5e3, "q\"uote"]}}}`, []string{"a?: unknown;"}},
		{"enum of literals", `{"type": "object", "properties": {"a": {"enum": [1.5e3, "q\"uote", false]}}}`, []string{`a?: 1.5e3 | "q\"uote" | false;`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewCatalog([]Tool{{Name: "odd", InputSchema: json.RawMessage(tt.schema), OutputSchema: json.RawMessage(tt.schema)}})
			got := c.Declarations()
			for _, want := range tt.contains {
				if !strings.Contains(got, want) {
					t.Errorf("Declarations() =\n%s\nwant it to contain\n%s", got, want)
				}
			}
			if got != c.Declarations() {
				t.Error("not deterministic")
			}
			_ = c.Index(0)
		})
	}
}
