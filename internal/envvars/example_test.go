package envvars_test

import (
	"fmt"

	"github.com/jetagent/jetagent/internal/envvars"
)

func Example() {
	var spec struct {
		Concurrency int
		MCPConfig   string `split_words:"true"`
	}
	known, _ := envvars.Keys("APP", &spec)
	environ := []string{"APP_CONCURENCY=8", "APP_MCP_CONFIG=mcp.json", "APP_COLOUR=red", "HOME=/root"}
	for _, s := range envvars.Strays(environ, "APP_", known) {
		if s.Suggest != "" {
			fmt.Printf("%s is no setting: did you mean %s?\n", s.Name, s.Suggest)
		} else {
			fmt.Printf("%s is no setting\n", s.Name)
		}
	}
	// Output:
	// APP_COLOUR is no setting
	// APP_CONCURENCY is no setting: did you mean APP_CONCURRENCY?
}
