package clienttools_test

import (
	"encoding/json"
	"fmt"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/toolcache"
)

func ExampleMerge() {
	server := []toolcache.Tool{{Name: "read_file", Server: "fs", Parameters: json.RawMessage(`{"type":"object"}`)}}
	client := []clienttools.Decl{
		{Name: "read_file", InputSchema: json.RawMessage(`{"type":"object"}`)}, // cannot shadow the server's
		{Name: "ask_user", Description: "Ask the person at the keyboard", InputSchema: json.RawMessage(`{"properties":{"question":{"type":"string"}}}`)},
	}
	if err := clienttools.ValidateDecls(client, clienttools.DeclLimits{}); err != nil {
		fmt.Println(err)
		return
	}
	merged, clashes := clienttools.Merge(server, client)
	for _, t := range merged {
		fmt.Printf("%s server=%q %s\n", t.Name, t.Server, t.Parameters)
	}
	fmt.Println("clashes:", clashes)
	// Output:
	// read_file server="fs" {"type":"object"}
	// ask_user server="" {"type":"object","properties":{"question":{"type":"string"}}}
	// clashes: [read_file]
}
