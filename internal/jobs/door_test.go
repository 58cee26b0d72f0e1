package jobs_test

import (
	"errors"
	"testing"

	"github.com/jetagent/jetagent/internal/jobs"
)

// TestDoorWords: an empty body is called empty, and a job naming another
// queue than its subject's is refused with both named.
func TestDoorWords(t *testing.T) {
	t.Parallel()
	v, err := jobs.NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		body, want string
	}{
		{"", "job is not JSON: the body is empty"},
		{"\t \n", "job is not JSON: the body is empty (3 bytes of white space)"},
	} {
		_, err := v.DecodeJob([]byte(tt.body))
		if !errors.Is(err, jobs.ErrNotJSON) || err.Error() != tt.want {
			t.Errorf("%q: %v, want %q", tt.body, err, tt.want)
		}
	}
	names, _ := jobs.NewNames("")
	for _, tt := range []struct {
		queue, published string
		ok               bool
	}{{"", "default", true}, {"default", "default", true}, {"gpu", "gpu", true}, {"other", "default", false}} {
		err := jobs.CheckQueue(&jobs.Job{Task: "t", Queue: tt.queue}, tt.published, names)
		if (err == nil) != tt.ok || (err != nil && (!errors.Is(err, jobs.ErrWrongQueue) || !errors.Is(err, jobs.ErrRejected))) {
			t.Errorf("queue %q on %q: %v", tt.queue, tt.published, err)
		}
	}
}
