package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/jetagent/jetagent/internal/jobs"
)

// batchLine is one line of a batch file, parsed.
type batchLine struct {
	n   int
	job *jobs.Job
	err error
}

// readBatch parses a batch: per line a job object or a JSON string task.
func (c *cli) readBatch(r io.Reader, f *jobFlags, base *jobs.Job) ([]batchLine, error) {
	var lines []batchLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		j := *base
		j.Metadata = maps.Clone(base.Metadata) // apply adds --meta to it
		var err error
		switch b[0] {
		case '"':
			err = json.Unmarshal(b, &j.Task)
		case '{':
			var lj *jobs.Job
			if lj, err = c.decodeJob(b, false); err == nil {
				j = *lj
			}
		default:
			err = fmt.Errorf("want a JSON object (a job) or a JSON string (a task)")
		}
		if err == nil {
			err = f.apply(&j, false)
		}
		lines = append(lines, batchLine{n: n, job: &j, err: err})
	}
	return lines, sc.Err()
}

func (c *cli) batch(f *jobFlags, base *jobs.Job) (int, error) {
	if f.parallel < 1 {
		return 0, usagef("--parallel must be at least 1")
	}
	var in io.Reader = c.stdin
	if f.file != "-" {
		file, err := os.Open(f.file)
		if err != nil {
			return 0, err
		}
		defer file.Close()
		in = file
	}
	lines, err := c.readBatch(in, f, base)
	if err != nil {
		return 0, fmt.Errorf("--file %s: %w", f.file, err)
	}
	cl, err := c.connect()
	if err != nil {
		return 0, err
	}
	var out io.Writer
	switch {
	case f.outFile != "":
		file, err := os.Create(f.outFile)
		if err != nil {
			return 0, err
		}
		defer file.Close()
		out = file
	case f.json:
		out = c.stdout
	}

	p := newProgress(c.stderr, len(lines), isTerminal(c.stderr) && !f.json)
	results := make(chan *jobs.Result)
	sem := make(chan struct{}, f.parallel) // bounds jobs in flight
	var wg sync.WaitGroup
	go func() {
		for _, l := range lines {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				results <- c.runOne(cl, l)
			})
		}
		wg.Wait()
		close(results)
	}()
	failed := 0
	for res := range results {
		if res.Status != jobs.StatusSucceeded {
			failed++
		}
		if out != nil {
			if err := writeJSON(out, res); err != nil {
				return exitFailed, err
			}
		}
		p.done(res)
	}
	p.finish()
	if failed > 0 {
		return exitFailed, nil
	}
	return exitOK, nil
}

// runOne submits one batch job and waits for its end.
func (c *cli) runOne(cl *jobs.Client, l batchLine) *jobs.Result {
	fail := func(err error) *jobs.Result {
		id := l.job.ID
		if id == "" {
			id = fmt.Sprintf("line-%d", l.n)
		}
		return &jobs.Result{ID: id, Queue: l.job.Queue, Status: jobs.StatusFailed,
			Error: fmt.Sprintf("line %d: %v", l.n, err), Metadata: l.job.Metadata}
	}
	if l.err != nil {
		return fail(l.err)
	}
	rc, err := cl.Submit(c.ctx, l.job)
	if err != nil {
		return fail(err)
	}
	st, err := cl.Wait(c.ctx, rc.ID)
	if err != nil {
		return fail(err)
	}
	return resultOf(st)
}

// progress reports batch progress: a bar (done, failed, ETA) on a
// terminal, plain lines otherwise.
type progress struct {
	w            io.Writer
	bar          *progressbar.ProgressBar
	total, count int
	failed       int
	start        time.Time
}

func newProgress(w io.Writer, total int, tty bool) *progress {
	p := &progress{w: w, total: total, start: time.Now()}
	if tty {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("jobs"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
	}
	return p
}

func (p *progress) done(res *jobs.Result) {
	p.count++
	if res.Status != jobs.StatusSucceeded {
		p.failed++
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("%d ok, %d failed", p.count-p.failed, p.failed))
		_ = p.bar.Add(1)
		return
	}
	eta := "-"
	if p.count < p.total {
		per := time.Since(p.start) / time.Duration(p.count)
		eta = (per * time.Duration(p.total-p.count)).Round(time.Second).String()
	}
	line := fmt.Sprintf("[%d/%d] %d ok, %d failed, eta %s: %s %s", p.count, p.total, p.count-p.failed, p.failed, eta, res.ID, res.Status)
	if res.Error != "" {
		line += ": " + oneLine(res.Error, 200)
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	fmt.Fprintf(p.w, "%d jobs: %d succeeded, %d did not (%s)\n", p.total, p.total-p.failed, p.failed,
		time.Since(p.start).Round(time.Millisecond))
}
