package jobs

import (
	"fmt"
	"time"
)

// applied is what the worker applies of a job's own settings: the timeout,
// and a note for each setting it did not take as given (a timeout that is
// not positive; whatever Config.Notes reports, such as a max_rounds above
// the cap). The notes go into the started event and the log, so nothing
// the job asked for is changed without a word.
func (w *Worker) applied(j *Job) (timeout time.Duration, notes []string) {
	timeout = w.cfg.JobTimeout
	t, err := j.TimeoutDuration()
	switch {
	case err != nil: // the schema checks the syntax; a value Go cannot hold (overflow) ends here
		notes = append(notes, fmt.Sprintf("timeout %q is not a usable duration (%v): the worker's %s applies",
			j.Timeout, err, w.cfg.JobTimeout))
	case j.Timeout != "" && t <= 0:
		notes = append(notes, fmt.Sprintf("timeout %q is not positive: the worker's default %s applies",
			j.Timeout, w.cfg.JobTimeout))
	case t > 0:
		timeout = t
	}
	if w.cfg.Notes != nil {
		notes = append(notes, w.cfg.Notes(j)...)
	}
	return timeout, notes
}
