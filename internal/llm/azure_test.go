package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
)

// An Azure OpenAI deployment URL (with its api-version query, as the portal
// shows it) is refused saying which URL works: the v1 API's. Before: only
// "must not have a query or fragment", a dead end.
func TestAzureDeploymentURLHinted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, base, want string
	}{
		{"deployment", "https://res.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
			"(for Azure OpenAI use its v1 API, https://res.openai.azure.com/openai/v1, with the deployment's name as the model)"},
		{"Foundry host", "https://res.cognitiveservices.azure.com/openai/deployments/gpt-4o?api-version=2025-01-01-preview",
			"use its v1 API, https://res.cognitiveservices.azure.com/openai/v1,"},
		{"another query", "http://localhost:8000/v1?key=x", "must not have a query or fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := llm.New(llm.Config{BaseURL: tc.base, Model: "gpt-4o"})
			if !errors.Is(err, llm.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
			if tc.name == "another query" && strings.Contains(err.Error(), "Azure") {
				t.Errorf("err = %v names Azure", err)
			}
		})
	}
	if _, err := llm.New(llm.Config{BaseURL: "https://res.openai.azure.com/openai/v1", Model: "gpt-4o", APIKey: "k"}); err != nil {
		t.Errorf("the v1 URL: %v", err)
	}
}
