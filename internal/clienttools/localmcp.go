package clienttools

import (
	"context"
	"encoding/json"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// LocalMCPDecls declares the tools of a local MCP view (the submitter's own
// servers, `submit --local-mcp CONFIG`) as client tools.
func LocalMCPDecls(v *toolcache.View) []Decl {
	tools := v.Tools()
	decls := make([]Decl, len(tools))
	for i, t := range tools {
		decls[i] = Decl{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
	}
	return decls
}

// LocalMCPHandler answers client tool requests by calling the tool of the
// same name on a local MCP view. Tool failures (isError) and call failures
// (unknown tool, session lost) both reach the model as tool errors.
func LocalMCPHandler(v *toolcache.View) Handler {
	return func(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
		res, err := v.CallTool(ctx, name, args)
		if err != nil {
			return "", true, err
		}
		return res.Text, res.IsError, nil
	}
}
