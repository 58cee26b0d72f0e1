package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	serverName    = "jetagent-example"
	serverVersion = "0.1.0"
	indexURI      = "notes://index"
	// maxSlow caps the slow tool, so a typo cannot hang a test for hours.
	maxSlow = 60_000
)

// newServer returns the example MCP server with its tools and resource.
func newServer() *server.MCPServer {
	s := server.NewMCPServer(serverName, serverVersion,
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(false, true),
		server.WithInputSchemaValidation(),
		server.WithRecovery(),
		server.WithInstructions("Example tools: arithmetic, fake weather, an in-memory notebook, and a slow tool for cancellation tests."),
	)
	nb := &notebook{}
	nb.onChange = func(empty bool) {
		// AddTool and DeleteTools send notifications/tools/list_changed.
		if empty {
			s.DeleteTools("delete_note")
		} else {
			s.AddTool(deleteNoteTool, deleteNote(nb))
		}
	}

	s.AddTool(mcp.NewTool("add",
		mcp.WithDescription("Add two numbers."),
		mcp.WithNumber("a", mcp.Required(), mcp.Description("First addend.")),
		mcp.WithNumber("b", mcp.Required(), mcp.Description("Second addend.")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
	), add)

	s.AddTool(mcp.NewTool("get_weather",
		mcp.WithDescription("Current weather for a city (deterministic fake data)."),
		mcp.WithString("city", mcp.Required(), mcp.Description("City name, e.g. Lisbon.")),
		mcp.WithString("unit", mcp.Enum("celsius", "fahrenheit"), mcp.DefaultString("celsius"),
			mcp.Description("Temperature unit.")),
		mcp.WithOutputSchema[weather](),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
	), getWeather)

	s.AddTool(mcp.NewTool("search_notes",
		mcp.WithDescription("Search notes by text in the title or body, optionally filtered by tags."),
		mcp.WithString("query", mcp.Required(), mcp.Description("Text to look for; empty matches every note.")),
		mcp.WithInteger("limit", mcp.Min(1), mcp.Max(50), mcp.DefaultNumber(10), mcp.Description("Most notes to return.")),
		mcp.WithObject("filter", mcp.Description("Restrict the search by tags."),
			mcp.Properties(map[string]any{
				"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"},
					"description": "Tags to match."},
				"match": map[string]any{"type": "string", "enum": []string{"any", "all"}, "default": "any",
					"description": "Whether a note needs any or all of the tags."},
			})),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
	), searchNotes(nb))

	s.AddTool(mcp.NewTool("create_note",
		mcp.WithDescription("Create a note and return its ID."),
		mcp.WithString("title", mcp.Required(), mcp.MinLength(1), mcp.Description("Note title.")),
		mcp.WithString("body", mcp.Required(), mcp.Description("Note text.")),
		mcp.WithArray("tags", mcp.WithStringItems(), mcp.Description("Tags for filtering.")),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
	), createNote(nb))

	s.AddTool(mcp.NewTool("slow",
		mcp.WithDescription("Sleep for ms milliseconds, stopping early if the call is cancelled."),
		mcp.WithInteger("ms", mcp.Required(), mcp.Min(0), mcp.Max(maxSlow), mcp.Description("How long to sleep.")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
	), slow)

	s.AddResource(mcp.NewResource(indexURI, "Notes index",
		mcp.WithResourceDescription("All notes, as a JSON array."),
		mcp.WithMIMEType("application/json"),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		data, err := json.Marshal(nb.list())
		if err != nil {
			return nil, fmt.Errorf("notes index: %w", err)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: indexURI, MIMEType: "application/json", Text: string(data)}}, nil
	})
	return s
}

var deleteNoteTool = mcp.NewTool("delete_note",
	mcp.WithDescription("Delete a note by ID. Listed only while a note exists."),
	mcp.WithString("id", mcp.Required(), mcp.Description("Note ID, as create_note returned it.")),
	mcp.WithDestructiveHintAnnotation(true),
	mcp.WithIdempotentHintAnnotation(true),
	mcp.WithOpenWorldHintAnnotation(false),
)

func add(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, err := req.RequireFloat("a")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	b, err := req.RequireFloat("b")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(fmt.Sprint(a + b)), nil
}

// weather is get_weather's structured result.
type weather struct {
	City        string  `json:"city"`
	Temperature float64 `json:"temperature"`
	Unit        string  `json:"unit"`
	Conditions  string  `json:"conditions"`
	Humidity    int     `json:"humidity"`
}

var conditions = []string{"sunny", "cloudy", "rain", "windy", "fog"}

// fakeWeather derives the weather from the city name alone, so that tests
// and demos get the same answer every time.
func fakeWeather(city, unit string) weather {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(strings.TrimSpace(city))))
	sum := h.Sum32()
	w := weather{
		City:        city,
		Temperature: float64(int(sum%40) - 5), // -5..34 °C
		Unit:        "celsius",
		Conditions:  conditions[sum/40%uint32(len(conditions))],
		Humidity:    30 + int(sum/200%60),
	}
	if unit == "fahrenheit" {
		w.Temperature = w.Temperature*9/5 + 32
		w.Unit = unit
	}
	return w
}

func getWeather(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	city, err := req.RequireString("city")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	unit := req.GetString("unit", "celsius")
	if unit != "celsius" && unit != "fahrenheit" {
		return mcp.NewToolResultError(fmt.Sprintf("unit must be celsius or fahrenheit, not %q", unit)), nil
	}
	w := fakeWeather(city, unit)
	text := fmt.Sprintf("%s: %g° %s, %s, humidity %d%%", w.City, w.Temperature, w.Unit, w.Conditions, w.Humidity)
	return mcp.NewToolResultStructured(w, text), nil
}

// searchArgs is search_notes' input.
type searchArgs struct {
	Query  string `json:"query"`
	Limit  int    `json:"limit"`
	Filter struct {
		Tags  []string `json:"tags"`
		Match string   `json:"match"`
	} `json:"filter"`
}

func searchNotes(nb *notebook) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := searchArgs{Limit: 10}
		if err := req.BindArguments(&args); err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("arguments: %v", err)), nil
		}
		found := nb.search(args.Query, args.Limit, args.Filter.Tags, args.Filter.Match == "all")
		return jsonResult(found)
	}
}

func createNote(nb *notebook) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Title string   `json:"title"`
			Body  string   `json:"body"`
			Tags  []string `json:"tags"`
		}
		if err := req.BindArguments(&args); err != nil {
			return mcp.NewToolResultError(fmt.Sprintf("arguments: %v", err)), nil
		}
		return jsonResult(nb.create(args.Title, args.Body, args.Tags))
	}
}

func deleteNote(nb *notebook) server.ToolHandlerFunc {
	return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id, err := req.RequireString("id")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if err := nb.delete(id); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("deleted " + id), nil
	}
}

func slow(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ms, err := req.RequireInt("ms")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	ms = min(max(ms, 0), maxSlow)
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return mcp.NewToolResultText(fmt.Sprintf("slept %d ms", ms)), nil
	case <-ctx.Done():
		// The client cancelled (notifications/cancelled) or went away.
		return nil, fmt.Errorf("slow: %w", ctx.Err())
	}
}

func jsonResult(v any) (*mcp.CallToolResult, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return mcp.NewToolResultText(string(data)), nil
}
