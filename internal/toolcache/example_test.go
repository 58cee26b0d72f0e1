package toolcache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/toolcache"
)

func Example() {
	// The operator's config, as Claude Desktop / Cursor write it. Jobs only
	// name servers from it.
	cfg, err := toolcache.ParseConfig([]byte(`{"mcpServers": {
		"files": {"command": "mcp-server-filesystem", "args": ["/srv/data"], "disabled": true}
	}}`))
	if err != nil {
		log.Fatal(err)
	}
	// An in-process mcp-go server stands in for a real one here.
	weather := server.NewMCPServer("weather", "1.0.0", server.WithToolCapabilities(true))
	weather.AddTool(mcp.NewTool("get_forecast", mcp.WithDescription("Forecast for a city."), mcp.WithString("city", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("sunny in " + req.GetString("city", "")), nil
		})

	ctx := context.Background()
	pool, err := toolcache.NewPool(ctx, cfg, toolcache.WithInProcessServer("weather", weather, toolcache.ServerConfig{}))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	job, err := pool.View("job-1", []string{"weather"}, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer job.Close()
	for _, t := range job.Tools() {
		fmt.Println(t.Name, "-", t.Description, string(t.Parameters))
	}
	res, err := job.CallTool(ctx, "get_forecast", json.RawMessage(`{"city":"Oslo"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text)
	for _, st := range pool.Status() {
		fmt.Println(st.Name, st.State)
	}
	// Output:
	// get_forecast - Forecast for a city. {"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
	// sunny in Oslo
	// files disabled
	// weather ready
}
