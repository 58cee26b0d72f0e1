package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jetagent/jetagent/internal/codemode"
)

// logsHost serves error logs and creates tickets.
type logsHost struct{ tickets []string }

func (h *logsHost) Call(ctx context.Context, seq int, name string, args json.RawMessage) (codemode.Result, error) {
	switch name {
	case "logging-get_logs":
		return codemode.Result{Structured: json.RawMessage(`{"lines":[
			{"level":"error","message":"disk full"},
			{"level":"error","message":"timeout"},
			{"level":"error","message":"disk full"}]}`)}, nil
	case "tickets-create":
		var a struct{ Title string }
		if err := json.Unmarshal(args, &a); err != nil {
			return codemode.Result{}, err
		}
		h.tickets = append(h.tickets, a.Title)
		return codemode.Result{Text: fmt.Sprintf(`{"id":%d}`, len(h.tickets))}, nil
	}
	return codemode.Result{}, fmt.Errorf("no tool %s", name)
}

func (h *logsHost) Now(seq int) int64      { return 1_700_000_000_000 }
func (h *logsHost) Random(seq int) float64 { return 0.5 }

func ExampleCatalog_Run() {
	cat := codemode.NewCatalog([]codemode.Tool{
		{Name: "logging-get_logs", Description: "Read log lines."},
		{Name: "tickets-create", Description: "Create a ticket."},
	})
	host := &logsHost{}
	out := cat.Run(context.Background(), `
const {lines} = await tools.logging_get_logs({level: "error"});
const distinct = [...new Set(lines.map(l => l.message))];
const ids = await Promise.all(distinct.map(title => tools.tickets_create({title})));
console.log("created", ids.length, "tickets");
ids.map(t => t.id)
`, host, codemode.Limits{})
	fmt.Println(out.Text)
	fmt.Println(out.Calls, out.Err, host.tickets)
	// Output:
	// created 2 tickets
	// [1,2]
	// 3 <nil> [disk full timeout]
}

func ExampleCatalog_Declarations() {
	cat := codemode.NewCatalog([]codemode.Tool{{
		Name:        "tickets-create",
		Description: "Create a ticket.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"title":{"type":"string","description":"One line."},
			"priority":{"enum":["low","high"]}},"required":["title"]}`),
	}})
	fmt.Print(cat.Declarations())
	fmt.Println(cat.Index(0))
	// Output:
	// interface TicketsCreateInput {
	//   /** One line. */
	//   title: string;
	//   priority?: "low" | "high";
	// }
	//
	// declare const tools: {
	//   /**
	//    * Create a ticket.
	//    * Tool "tickets-create".
	//    */
	//   tickets_create(args: TicketsCreateInput): Promise<unknown>;
	// };
	// tickets_create({title, priority?}): Create a ticket.
}
