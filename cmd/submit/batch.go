package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/schollz/progressbar/v3"

	"github.com/jetagent/jetagent/internal/jobs"
)

var utf8BOM = []byte("\ufeff")

// batchLine is one line of a batch file, parsed.
type batchLine struct {
	n   int
	job *jobs.Job
	err error
}

// readBatch parses a batch: per line a job object or a JSON string task.
// base (from --job) gives every line its defaults; a line's own fields win.
func (c *cli) readBatch(r io.Reader, f *jobFlags, base *jobs.Job) ([]batchLine, error) {
	var lines []batchLine
	idLine := map[string]int{} // a job id and the first line that gives it
	br := bufio.NewReaderSize(r, 64<<10)
	keep := max(16<<20, writtenLimit(c.settings.MaxJobBytes)) // a line longer cannot be a job that fits
	for n := 1; ; n++ {
		line, size, rerr := readLine(br, keep)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return lines, rerr
		}
		if rerr != nil && size == 0 {
			break
		}
		if n == 1 && isUTF16(line) {
			// Each line was refused as "want a JSON object (a job) or a
			// JSON string (a task)", and the NUL after the last newline
			// made a line of its own.
			return nil, errUTF16
		}
		b := bytes.TrimSpace(line)
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		j := *base
		j.Metadata = maps.Clone(base.Metadata) // the line and --meta add to it
		var err error
		switch {
		case size > len(line):
			// bufio.Scanner stopped the whole batch here ("token too
			// long", no line number); the line is refused by its number
			// like any other that is not valid, and the rest still run.
			err = fmt.Errorf("%w: line of %d bytes, limit %d", jobs.ErrTooLarge, size, c.settings.MaxJobBytes)
		case bytes.IndexByte(b, 0) >= 0:
			// JSON text holds no NUL byte; UTF-16 without its byte order
			// mark has one beside each ASCII character.
			err = errors.New("the line holds a NUL byte, which JSON cannot: is the file UTF-16? save it as UTF-8")
		case bytes.HasPrefix(b, utf8BOM):
			// Editors that save UTF-8 "with signature" put one before the
			// first line; the line looked right and was refused as neither
			// an object nor a string.
			err = errors.New("the line starts with a UTF-8 byte order mark (an editor's \"UTF-8 with BOM\"): save the file without it")
		case b[0] == '"':
			if err = json.Unmarshal(b, &j.Task); err != nil {
				err = fmt.Errorf("task is not a JSON string: %w", err)
			} else {
				err = c.checkStringLine(b)
			}
		case b[0] == '{':
			if _, err = c.decodeJob(b, false); err == nil {
				err = jobs.UnmarshalJob(b, &j) // over the defaults: the line's fields win
			} else {
				// Refused (a schema error): the result still names the
				// line's job by its id when the line gives a valid one (an
				// invalid one may hold anything, terminal escapes too).
				var named struct {
					ID string `json:"id"`
				}
				if json.Unmarshal(b, &named) == nil && jobs.ValidID(named.ID) {
					j.ID = named.ID
				}
			}
		default:
			err = fmt.Errorf("want a JSON object (a job) or a JSON string (a task)")
		}
		if err == nil {
			err = f.apply(&j, false)
		}
		if err == nil {
			err = checkJob(&j)
		}
		if err == nil && j.ID != "" {
			if first, seen := idLine[j.ID]; seen {
				// Submitted twice, it would run once and both lines would
				// report the one outcome.
				err = fmt.Errorf("%w: id %s is also on line %d; a batch runs each id once (give this line its own id)",
					errDuplicate, j.ID, first)
			} else {
				idLine[j.ID] = n
			}
		}
		lines = append(lines, batchLine{n: n, job: &j, err: err})
		if rerr != nil { // io.EOF after a last line without a newline
			break
		}
	}
	return lines, nil
}

// errUTF16: a batch file that starts with a UTF-16 byte order mark.
var errUTF16 = errors.New("the file is UTF-16 (it starts with a UTF-16 byte order mark; PowerShell's > and Out-File " +
	"write so): save it as UTF-8 (Out-File -Encoding utf8, or iconv -f UTF-16 -t UTF-8)")

// isUTF16 reports whether b starts with a UTF-16 byte order mark.
func isUTF16(b []byte) bool {
	return bytes.HasPrefix(b, []byte{0xff, 0xfe}) || bytes.HasPrefix(b, []byte{0xfe, 0xff})
}

// taskPrefix makes a batch line that is a JSON string a job object.
const taskPrefix = `{"task":`

// atByte is a byte offset in a reason of the job validator.
var atByte = regexp.MustCompile(`at byte ([0-9]+)`)

// checkStringLine refuses a line that is a JSON string (a task) for what
// the worker refuses in a job and encoding/json changes without a word:
// bytes that are not UTF-8 and an escape of half a UTF-16 pair ("\ud800")
// each became U+FFFD, so the task run was not the line's, while the same
// task in a line that is an object was refused. A string with a \u escape
// is checked as the job {"task": line}, with the worker's reasons; their
// byte offsets are the line's. (Its size is checked later, against the
// server's limit.)
func (c *cli) checkStringLine(b []byte) error {
	if err := notUTF8("the task", string(b)); err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(`\u`)) {
		return nil
	}
	_, err := c.decodeJob(append(append([]byte(taskPrefix), b...), '}'), false)
	if err == nil {
		return nil
	}
	return errors.New(atByte.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, _ := strconv.Atoi(atByte.FindStringSubmatch(m)[1])
		return "at byte " + strconv.Itoa(max(0, n-len(taskPrefix)))
	}))
}

// readLine reads one line (without its newline) of which it keeps at most
// keep bytes; size is the line's whole length. err is io.EOF at the end
// (with the last line, if it had no newline).
func readLine(br *bufio.Reader, keep int) (line []byte, size int, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		size += len(frag)
		if room := keep - len(line); room > 0 {
			line = append(line, frag[:min(len(frag), room)]...)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return line, size, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		return line, size - 1, nil
	}
}

// batchResult is one line of --out: the job's result and the batch line
// it came from (results are written as jobs end, not in line order).
type batchResult struct {
	Line int `json:"line"`
	*jobs.Result
	err error // why the line has no outcome of the job's own (errNotSubmitted, errStoppedWaiting, ...); nil if it has
}

func (c *cli) batch(f *jobFlags, base *jobs.Job) (int, error) {
	if f.parallel < 1 {
		return 0, usagef("--parallel must be at least 1")
	}
	if base.ID != "" {
		return 0, usagef("--job %s sets an id: in a batch every job needs its own (give ids on the lines)", f.jobFile)
	}
	if f.file != "-" && f.outFile != "" {
		// --out is created (truncated) before the jobs run: the batch
		// file given as its own --out was replaced by the results, the
		// jobs lost.
		fi, err1 := os.Stat(f.file)
		fo, err2 := os.Stat(f.outFile)
		if err1 == nil && err2 == nil && os.SameFile(fi, fo) {
			return 0, usagef("--out %s is the batch file --file %s: it would be overwritten with the results; write them to another file", f.outFile, f.file)
		}
	}
	in := c.stdin
	if f.file == "-" && isTerminal(in) {
		// Nothing said submit was reading the terminal: it looked hung.
		fmt.Fprintln(c.stderr, "submit: reading the batch from the terminal, one job a line; end it with Ctrl-D")
	}
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
	if len(lines) == 0 {
		// "0 jobs" and exit 0 read as a batch that went well: a wrong or
		// truncated file (or an empty stdin) went unnoticed.
		name := f.file
		if name == "-" {
			name = "standard input"
		}
		return 0, usagef("no jobs in %s: a batch file holds one job a line, a JSON object or a JSON string "+
			"(blank lines and lines starting with # are skipped)", name)
	}
	cl, err := c.connect()
	if err != nil {
		return 0, err
	}
	warned := map[string]bool{}
	for _, l := range lines {
		if q := cmp.Or(l.job.Queue, jobs.DefaultQueue); l.err == nil && !warned[q] {
			warned[q] = true
			c.warnUnserved(cl, q)
		}
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

	p := newProgress(c.stderr, len(lines), isTerminal(c.stderr) && !f.json, f.detach)
	defer p.stop()
	var waits *waiting // the jobs waited for, told of when they stall
	stopStalls := func() {}
	if !f.detach {
		waits = &waiting{}
		stopStalls = c.watchStalls(cl, waits.list, p.note, true)
		defer stopStalls()
	}
	results := make(chan batchResult)
	sem := make(chan struct{}, f.parallel) // bounds jobs in flight
	var wg sync.WaitGroup
	go func() {
		for _, l := range lines {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				results <- c.runOne(cl, l, waits)
			})
		}
		wg.Wait()
		close(results)
	}()
	failed, unwritten, notSent := 0, 0, 0
	var writeErr error
	for res := range results {
		if !p.ok(res.Result) {
			failed++
		}
		switch {
		case out == nil:
		case writeErr == nil:
			if writeErr = writeJSON(out, res); writeErr != nil {
				// A full disk or a closed pipe: the lines not submitted
				// yet are not, rather than run with results going nowhere.
				c.resultsBroken.Store(true)
				unwritten++
			}
		case errors.Is(res.err, errResultsBroken):
			notSent++
		default:
			unwritten++
		}
		p.done(res)
	}
	stopStalls() // no notice after the summary
	p.finish()
	if writeErr != nil {
		where := "standard output"
		if f.outFile != "" {
			where = "--out " + f.outFile
		}
		return exitFailed, fmt.Errorf("%s: %w: the results of %s are not there (the lines above name the jobs: "+
			"submit status ID), %s not submitted", where, writeErr, plural(unwritten, "job", "jobs"), plural(notSent, "line was", "lines were"))
	}
	if failed > 0 {
		return exitFailed, nil
	}
	return exitOK, nil
}

// Batch outcomes that are not a job's own (the progress counts them).
var (
	errNotSubmitted   = errors.New("not submitted: interrupted")
	errResultsBroken  = errors.New("not submitted: the results could not be written")
	errStoppedWaiting = errors.New("interrupted: stopped waiting; the job goes on")
	errDuplicate      = errors.New("duplicate job id")
)

// submitTimeout bounds one submission once started: an interrupt does not
// cut it short, so a job is either queued with its state or not at all.
const submitTimeout = 30 * time.Second

// runOne submits one batch job and, unless waits is nil (--detach), waits
// for its end, in waits meanwhile. After an interrupt (c.ctx done) it
// submits nothing more, and a job it waits for is reported as it stands:
// it goes on without us.
func (c *cli) runOne(cl *jobs.Client, l batchLine, waits *waiting) batchResult {
	job := *l.job
	fail := func(err error) batchResult {
		id := job.ID
		if id == "" {
			id = fmt.Sprintf("line-%d", l.n)
		}
		return batchResult{Line: l.n, err: err, Result: &jobs.Result{ID: id, Queue: job.Queue, Status: jobs.StatusFailed,
			Error: err.Error(), Metadata: job.Metadata}}
	}
	if l.err != nil {
		return fail(l.err)
	}
	if c.ctx.Err() != nil {
		return fail(errNotSubmitted)
	}
	if c.resultsBroken.Load() {
		return fail(errResultsBroken)
	}
	if job.ID == "" {
		// Named here, so the result of a submission that fails half-way
		// (state written, publish unanswered) still names the job.
		job.ID = ulid.Make().String()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), submitTimeout)
	rc, err := cl.Submit(sctx, &job)
	cancel()
	if err != nil {
		if errors.Is(err, jobs.ErrRejected) { // refused before publishing: no job
			job.ID = l.job.ID
		}
		return fail(err)
	}
	if rc.Duplicate {
		// The id was submitted before (another batch, another submit):
		// nothing was queued, and that job's outcome is not this line's.
		return fail(fmt.Errorf("%w: job %s was submitted before (%s) and is not queued again; its outcome is not "+
			"this line's (submit status %s; give the line another id to run it)", errDuplicate, rc.ID, rc.State.Status, rc.ID))
	}
	if waits == nil || rc.State.Status.Terminal() {
		res := resultOf(rc.State)
		res.Metadata = job.Metadata
		return batchResult{Line: l.n, Result: res}
	}
	waits.add(rc.ID)
	st, err := cl.Wait(c.ctx, rc.ID)
	waits.remove(rc.ID)
	if err == nil {
		// An answer too large for the state is read back in full; should
		// that fail, the preview and its reference are the result.
		if res, err := cl.FullResult(c.ctx, resultOf(st)); err == nil {
			return batchResult{Line: l.n, Result: res}
		}
		return batchResult{Line: l.n, Result: resultOf(st)}
	}
	if c.ctx.Err() == nil {
		return fail(err)
	}
	sctx, cancel = context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
	defer cancel()
	if cur, err := cl.Status(sctx, rc.ID); err == nil {
		st = cur
	} else {
		st = rc.State
	}
	err = fmt.Errorf("%w (submit watch %s)", errStoppedWaiting, rc.ID)
	return batchResult{Line: l.n, err: err, Result: &jobs.Result{ID: rc.ID, Queue: rc.Queue, Status: st.Status,
		Metadata: job.Metadata, Error: err.Error()}}
}

// progress reports batch progress: a bar (done, failed, ETA) on a
// terminal, with each failure printed above it, and plain lines otherwise.
type progress struct {
	w            io.Writer
	bar          *progressbar.ProgressBar
	detach       bool
	total, count int
	failed       int
	goesOn       int // interrupted while running: they go on
	notSent      int // interrupted before they were submitted
	start        time.Time
	stopTick     chan struct{}
	ticking      sync.WaitGroup
}

func newProgress(w io.Writer, total int, tty, detach bool) *progress {
	p := &progress{w: w, total: total, detach: detach, start: time.Now(), stopTick: make(chan struct{})}
	if tty && total > 0 {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("jobs"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
		)
		_ = p.bar.RenderBlank()
		// Redraw every second, so elapsed time and ETA move while long
		// jobs run and no completion triggers a redraw.
		p.ticking.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-p.stopTick:
					return
				case <-t.C:
					_ = p.bar.Add(0)
				}
			}
		})
	}
	return p
}

// ok reports whether a line counts as done well: the job succeeded, or,
// with --detach, it was submitted.
func (p *progress) ok(res *jobs.Result) bool {
	return res.Status == jobs.StatusSucceeded || (p.detach && !res.Status.Terminal())
}

func (p *progress) done(res batchResult) {
	p.count++
	if !p.ok(res.Result) {
		p.failed++
		switch {
		case errors.Is(res.err, errStoppedWaiting):
			p.goesOn++
		case errors.Is(res.err, errNotSubmitted):
			p.notSent++
		}
	}
	line := fmt.Sprintf("line %d: %s %s", res.Line, res.ID, res.Status)
	if res.ID == fmt.Sprintf("line-%d", res.Line) { // no job id: the line's number is its name
		line = fmt.Sprintf("line %d: %s", res.Line, res.Status)
	}
	if res.Error != "" {
		line += ": " + oneLine(res.Error, 200)
	}
	if p.bar != nil {
		if !p.ok(res.Result) { // failures stay on screen above the bar
			_, _ = progressbar.Bprintln(p.bar, line)
		}
		p.bar.Describe(fmt.Sprintf("%d %s, %d failed", p.count-p.failed, p.okWord(), p.failed))
		_ = p.bar.Add(1)
		return
	}
	eta := "-"
	if p.count < p.total && !p.detach {
		per := time.Since(p.start) / time.Duration(p.count)
		eta = (per * time.Duration(p.total-p.count)).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "[%d/%d] %d %s, %d failed, eta %s: %s\n", p.count, p.total, p.count-p.failed, p.okWord(), p.failed, eta, line)
}

// note prints msg (a stalled job) above the bar, or as a line of its own;
// safe beside done, which another goroutine calls.
func (p *progress) note(msg string) {
	if p.bar != nil {
		_, _ = progressbar.Bprintln(p.bar, msg)
		return
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) okWord() string {
	if p.detach {
		return "submitted"
	}
	return "ok"
}

// stop ends the redraws.
func (p *progress) stop() {
	select {
	case <-p.stopTick:
	default:
		close(p.stopTick)
	}
	p.ticking.Wait()
}

func (p *progress) finish() {
	p.stop()
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	verb, not := "succeeded", "did not"
	if p.detach {
		verb, not = "submitted", "not"
	}
	fmt.Fprintf(p.w, "%d jobs: %d %s, %d %s (%s)\n", p.total, p.total-p.failed, verb, p.failed, not,
		time.Since(p.start).Round(time.Millisecond))
	if p.goesOn+p.notSent > 0 {
		fmt.Fprintf(p.w, "interrupted: %s still going on (submit watch ID), %s not submitted\n",
			plural(p.goesOn, "job", "jobs"), plural(p.notSent, "line", "lines"))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
