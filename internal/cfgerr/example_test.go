package cfgerr_test

import (
	"errors"
	"fmt"

	"github.com/jetagent/jetagent/internal/cfgerr"
)

var errConfig = errors.New("lib: invalid configuration")

func Example() {
	err := fmt.Errorf("start: %w", cfgerr.Fields(errConfig, []string{"Heartbeat", "AckWait"},
		"heartbeat", "%s must be below the ack wait %s", "40s", "30s"))
	fmt.Println(err)

	// A binary maps the field at fault to the variable that sets it.
	vars := map[string]string{"Heartbeat": "APP_HEARTBEAT", "AckWait": "APP_ACK_WAIT"}
	if fe, ok := cfgerr.As(err); ok {
		fmt.Printf("invalid %s: %s\n", vars[fe.Fields[0]], fe.Msg)
	}
	fmt.Println(errors.Is(err, errConfig))
	// Output:
	// start: lib: invalid configuration: heartbeat 40s must be below the ack wait 30s
	// invalid APP_HEARTBEAT: 40s must be below the ack wait 30s
	// true
}
