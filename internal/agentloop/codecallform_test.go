package agentloop_test

import (
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
)

// In code mode a search hit's call is the expression a script writes:
// the tool takes one object of named parameters, as execute_code's index
// shows ("tools.get_weather({city, units?})"). It was written
// "await tools.get_weather(city: string, ...)", which reads as positional
// parameters, and a script calling tools.get_weather("Oslo") failed.
func TestCodeModeSearchCallForm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, search string
		want         []string
	}{
		{"parameters in one object", `{"query":"weather forecast for a city","limit":1}`,
			[]string{`"call":"await tools.get_weather({city: string, units?: \"c\"|\"f\"})"`}},
		{"no parameters", `{"query":"a tool that always fails","limit":1}`, []string{`"call":"await tools.fail()"`}},
	}
	var ts testServer
	tools := newToolSet(t, &ts, false)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := firstToolAnswer(t, agentloop.Input{Task: "x", Mode: agentloop.ModeCode, Tools: tools}, "search_tools", tc.search)
			checkContains(t, out, tc.want, nil)
		})
	}
}
