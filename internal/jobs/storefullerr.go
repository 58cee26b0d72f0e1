package jobs

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// jsInsufficientResources is the JetStream API's "insufficient
// resources" (the store or memory limit reached).
const jsInsufficientResources jetstream.ErrorCode = 10023

// storeFull says what JetStream's "insufficient resources" means when err
// is one: submit printed only 'state of job-1: nats: nats: API error:
// code=503 err_code=10023 description=insufficient resources'. err is kept
// (errors.Is and errors.As still find it).
func storeFull(err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jsInsufficientResources {
		return fmt.Errorf("%w (the JetStream store is full: the server's max_file_store or the account's storage limit is reached)", err)
	}
	return err
}
