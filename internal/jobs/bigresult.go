package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// A job's final answer or error text can be longer than the server's
// max_payload allows the state (a KV value) to be. Then the full text is
// stored in the transcript bucket as <job_id>.answer or <job_id>.error,
// and the result (in the state and the terminal event) keeps a preview of
// it plus answer_ref or error_ref, a DataRef to the full text (raw UTF-8,
// not JSON). Client.FullResult and Client.FullState read the full text back.

// AnswerName is the object name of a job's full answer, stored when it is
// too large for the job's state.
func AnswerName(jobID string) string { return jobID + ".answer" }

// ErrorName is the object name of a job's full error text, stored when it
// is too large for the job's state.
func ErrorName(jobID string) string { return jobID + ".error" }

// errStateTooLarge aborts a state write that the server could not carry.
var errStateTooLarge = errors.New("state too large for the server's max_payload")

// offloadResult stores res's answer and error text, when longer than a
// preview, in the transcript bucket, and cuts them to previews with refs.
func (w *Worker) offloadResult(ctx context.Context, res *Result) error {
	n := min(PreviewBytes, w.payloadBudget()/8) // the error preview appears twice in a state
	for _, f := range []struct {
		text *string
		ref  **DataRef
		name string
	}{
		{&res.Answer, &res.AnswerRef, AnswerName(res.ID)},
		{&res.Error, &res.ErrorRef, ErrorName(res.ID)},
	} {
		if len(*f.text) <= n {
			continue
		}
		if err := w.putObject(ctx, f.name, []byte(*f.text)); err != nil {
			return fmt.Errorf("store %s: %w", f.name, err)
		}
		*f.ref = &DataRef{Bucket: w.names.TranscriptBucket(), Name: f.name, Bytes: len(*f.text)}
		*f.text = cutUTF8(*f.text, n)
	}
	return nil
}

// FullResult returns r with its answer and error text in full: for a
// result whose text was too large for the state (answer_ref, error_ref),
// read back from the transcript store, with the refs cleared. A result
// without refs is returned as it is.
func (c *Client) FullResult(ctx context.Context, r *Result) (*Result, error) {
	if r == nil || (r.AnswerRef == nil && r.ErrorRef == nil) {
		return r, nil
	}
	full := *r
	for _, f := range []struct {
		text *string
		ref  **DataRef
	}{{&full.Answer, &full.AnswerRef}, {&full.Error, &full.ErrorRef}} {
		if *f.ref == nil {
			continue
		}
		b, err := c.readRef(ctx, **f.ref)
		if err != nil {
			return nil, fmt.Errorf("result of %s: %w", r.ID, err)
		}
		*f.text, *f.ref = string(b), nil
	}
	return &full, nil
}

// FullState returns st with its result (and error) in full (see FullResult).
func (c *Client) FullState(ctx context.Context, st *State) (*State, error) {
	if st == nil || st.Result == nil || (st.Result.AnswerRef == nil && st.Result.ErrorRef == nil) {
		return st, nil
	}
	res, err := c.FullResult(ctx, st.Result)
	if err != nil {
		return nil, err
	}
	full := *st
	if full.Error != "" && strings.HasPrefix(res.Error, full.Error) {
		full.Error = res.Error
	}
	full.Result = res
	return &full, nil
}

// readRef reads a referenced object of this deployment's transcript bucket.
func (c *Client) readRef(ctx context.Context, ref DataRef) ([]byte, error) {
	if ref.Bucket != c.names.TranscriptBucket() {
		return nil, fmt.Errorf("%s in bucket %s, not %s", ref.Name, ref.Bucket, c.names.TranscriptBucket())
	}
	b, err := c.topo.Transcripts.GetBytes(ctx, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Name, err)
	}
	return b, nil
}
