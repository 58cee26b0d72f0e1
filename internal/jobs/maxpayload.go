package jobs

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// JobHeaderRoom is the part of the server's max_payload a job leaves for
// headers: its Nats-Msg-Id, and in its dead-letter copy the worker's
// reason (at most maxReasonBytes) and bookkeeping.
const JobHeaderRoom = 4096

// maxReasonBytes bounds a reason in a header or a state (a schema error
// can quote much of a job).
const maxReasonBytes = 1024

// ErrMaxPayload marks a job size limit the NATS server could not carry.
var ErrMaxPayload = errors.New("job size limit above what the NATS server carries")

// MaxJobBytesFor is the largest job nc's server can carry: its
// max_payload less JobHeaderRoom.
func MaxJobBytesFor(nc *nats.Conn) int {
	return int(nc.MaxPayload()) - JobHeaderRoom
}

// fitJobLimit returns the job size limit to use on nc: limit, or for 0 the
// default lowered to what the server carries. A limit above that is an
// error: jobs between the two could never be published.
func fitJobLimit(nc *nats.Conn, limit int) (int, error) {
	most := MaxJobBytesFor(nc)
	if most < 1 {
		return 0, fmt.Errorf("%w: %w: the server's max_payload is %d bytes, not even %d for headers",
			ErrConfig, ErrMaxPayload, nc.MaxPayload(), JobHeaderRoom)
	}
	switch {
	case limit <= 0:
		return min(DefaultMaxJobBytes, most), nil
	case limit > most:
		return 0, fmt.Errorf("%w: %w: %d bytes, but the server's max_payload is %d bytes, which leaves %d for a job "+
			"after %d for headers", ErrConfig, ErrMaxPayload, limit, nc.MaxPayload(), most, JobHeaderRoom)
	}
	return limit, nil
}

// cutReason bounds a reason to maxReasonBytes on a UTF-8 boundary.
func cutReason(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	return cutUTF8(s, maxReasonBytes-len("…")) + "…"
}

// cutUTF8 is the longest prefix of s of at most n bytes that does not
// split a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
