package toolcache

import "encoding/json"

// Tool is one tool in the registry's catalog.
type Tool struct {
	// Name is the name the model sees: unique across servers and matching
	// OpenAI's ^[a-zA-Z0-9_-]{1,64}$. Usually equal to Original.
	Name string `json:"name"`
	// Original is the name on the owning server, used for tools/call.
	Original string `json:"original"`
	// Server is the configured name of the owning MCP server ("" for tools
	// that are not MCP tools, such as meta tools or client tools).
	Server      string `json:"server"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema is the verbatim schema the server sent, for validation.
	InputSchema json.RawMessage `json:"inputSchema"`
	// Parameters is InputSchema normalised for providers ($schema dropped,
	// "type":"object" added where missing).
	Parameters   json.RawMessage `json:"parameters"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  Annotations     `json:"annotations"`
}

// Annotations are the MCP tool hints.
type Annotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// Result is the outcome of one tool call, flattened for the model.
type Result struct {
	// Text is the text content joined; non-text content is summarised.
	Text    string `json:"text"`
	IsError bool   `json:"isError,omitempty"`
	// Structured is the structuredContent, when the server sent one.
	Structured json.RawMessage `json:"structured,omitempty"`

	// joins are the offsets in Text of the '\n's flattenResult put
	// between content blocks: a secret a server's answer splits across
	// two blocks is masked there too (redact.TextAcross).
	joins []int
}

// Resource is a resource or resource template listed by a server.
type Resource struct {
	Server      string `json:"server"`
	URI         string `json:"uri,omitempty"`
	URITemplate string `json:"uriTemplate,omitempty"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
}
