package agentloop

import (
	"regexp"
	"strings"

	"github.com/jetagent/jetagent/internal/codemode"
)

// shapeCode is a code block calling the job's tools, written into the
// content in code mode instead of sent to execute_code.
const shapeCode = "code_block"

var (
	// reCodeFence is a fenced block of JavaScript or TypeScript, or of no
	// language.
	reCodeFence = regexp.MustCompile("(?s)```[ \\t]*(?i:javascript|js|jsx|mjs|typescript|ts|tsx)?[ \\t]*\\r?\\n(.*?)```")
	// reToolsCall is a call of a function on tools: tools.NAME( or
	// tools["NAME"]( (tools?.NAME( too).
	reToolsCall = regexp.MustCompile(`\btools\s*(?:\??\.\s*([A-Za-z_$][\w$]*)|\[\s*(?:"([^"\n]+)"|'([^'\n]+)')\s*\])\s*\(`)
)

// codeBlockCalls reads, in code mode, the fenced blocks of the content
// that call a tool of the catalog (await tools.NAME(...)): models that
// write code for a living often answer with the script instead of sending
// it to execute_code, and the block was taken as the job's final answer.
// Each such block is one execute_code script; rest is the content without
// them. Code that calls no tool of the job (an example, another language)
// stays in the answer.
func codeBlockCalls(content string, cat *codemode.Catalog) (codes []string, rest string) {
	if cat == nil || len(content) > maxNearMissIn || !strings.Contains(content, "```") {
		return nil, content
	}
	var b strings.Builder
	last := 0
	for _, m := range reCodeFence.FindAllStringSubmatchIndex(content, -1) {
		code := content[m[2]:m[3]]
		if !callsCatalogTool(code, cat) {
			continue
		}
		codes = append(codes, strings.TrimSpace(code))
		b.WriteString(content[last:m[0]])
		last = m[1]
	}
	if len(codes) == 0 {
		return nil, content
	}
	b.WriteString(content[last:])
	return codes, strings.TrimSpace(b.String())
}

// callsCatalogTool reports whether code calls a function of tools that
// the catalog has, by identifier or by name.
func callsCatalogTool(code string, cat *codemode.Catalog) bool {
	for _, m := range reToolsCall.FindAllStringSubmatch(code, -1) {
		if m[1] != "" {
			if _, ok := cat.Name(m[1]); ok {
				return true
			}
			continue
		}
		name := m[2] + m[3]
		if _, ok := cat.Ident(name); ok {
			return true
		}
		if _, ok := cat.Name(name); ok {
			return true
		}
	}
	return false
}
