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
	if !errors.As(err, &apiErr) {
		return err
	}
	switch apiErr.ErrorCode {
	case jsInsufficientResources:
		return fmt.Errorf("%w (the JetStream store is full: the server's max_file_store or the account's storage limit is reached; a worker's embedded server: JETAGENT_MAX_STORE, else 75%% of the disk space free when it started)", err)
	case jetstream.JSErrCodeStreamMessageExceedsMaximum:
		// Seen as 'publish job ms-1: nats: nats: API error: code=400
		// err_code=10054 description=message size exceeds maximum allowed'.
		return fmt.Errorf("%w (larger than the stream's max_msg_size, an operator's setting: nats stream info shows it)", err)
	}
	return err
}
