package jobs

import (
	"fmt"
	"strings"
	"testing"
)

// Anyone who may publish on the jobs subjects can invent queue names: 150
// jobs on 150 invented queues made 150 jetagent_jobs_unserved series and
// 150 warnings a minute on every worker (seen by a helper), and a subject
// token that is no queue name was quoted whole. The queues with the most
// jobs are named, at most maxUnservedQueues; the rest are counted as one.
func TestUnservedBounded(t *testing.T) {
	t.Parallel()
	waiting := map[string]uint64{}
	for i := 1; i <= maxUnservedQueues+5; i++ {
		waiting[fmt.Sprintf("q%02d", i)] = uint64(i) // q01 has 1 job, q25 25
	}
	waiting[strings.Repeat("ü", 100)] = 7 // not a queue name
	got, more := boundUnserved(waiting)
	if len(got) != maxUnservedQueues+1 || more != 6 {
		t.Fatalf("%d entries, %d more: %v", len(got), more, got)
	}
	for i := 6; i <= maxUnservedQueues+5; i++ {
		if q := fmt.Sprintf("q%02d", i); got[q] != uint64(i) {
			t.Errorf("%s: %d jobs, want %d", q, got[q], i)
		}
	}
	if got[otherQueues] != 1+2+3+4+5+7 {
		t.Errorf("%s: %d jobs, want 22", otherQueues, got[otherQueues])
	}
	if ValidQueue(otherQueues) {
		t.Errorf("%q is a valid queue name", otherQueues)
	}
	// Few queues: unchanged.
	few := map[string]uint64{"defualt": 2, "prod": 1}
	if got, more := boundUnserved(few); len(got) != 2 || more != 0 || got["defualt"] != 2 || got["prod"] != 1 {
		t.Errorf("boundUnserved(%v) = %v, %d", few, got, more)
	}
}
