package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// EmbedBatch is the most texts one /embeddings request carries (OpenAI's
// limit is 2,048 inputs and 300,000 tokens per request; local servers
// often take fewer).
const EmbedBatch = 128

// Embedder turns texts into vectors through the /embeddings endpoint of
// the configured OpenAI-compatible API, with the same retries, per-attempt
// timeout and error classes as Client. It is safe for concurrent use.
type Embedder struct {
	cfg Config
	svc openai.EmbeddingService
	// batch is the most texts a request carries, maxText the longest text
	// sent (bytes, 0: no bound): EmbedBatch and none until the server
	// refused a request as too large, then what it took (see embedFit).
	batch, maxText atomic.Int64
}

// NewEmbedder validates cfg (BaseURL, APIKey, retries, timeout, headers,
// HTTP client as for New) and returns an embedder for model, which
// replaces cfg.Model.
func NewEmbedder(cfg Config, model string) (*Embedder, error) {
	cfg.Model = model
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Embedder{cfg: cfg, svc: openai.NewEmbeddingService(cfg.requestOptions()...)}, nil
}

// Model is the embedding model.
func (e *Embedder) Model() string { return e.cfg.Model }

// Embed returns one vector per text, in order, in requests of at most
// EmbedBatch texts (fewer, and texts cut, once the server refused larger:
// embedFit). An empty text is sent as one space (the API refuses empty
// inputs). Every vector has the same length, or Embed fails.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); {
		n := int(e.batch.Load())
		if n <= 0 {
			n = EmbedBatch
		}
		batch := texts[start:min(start+n, len(texts))]
		vecs, err := e.embedFit(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
		start += len(batch)
	}
	for _, v := range out {
		if len(v) != len(out[0]) {
			return nil, nonRetryable(fmt.Errorf("llm: embeddings of different lengths (%d and %d)", len(out[0]), len(v)))
		}
	}
	return out, nil
}

// embedFit embeds texts in one request or, when the server refuses it as
// too large, in smaller ones. OpenAI takes 2,048 inputs and 300,000
// tokens a request, but OpenAI-compatible servers take far less (32
// inputs, or texts of 512 tokens, by default on some), and they refuse
// more with a client error (400, 413 or 422) rather than cutting. A batch
// refused so is told apart by its longest text sent alone: refused too,
// it is cut to half its length until it passes (down to minEmbedCut
// bytes), and the batch, its texts now cut as much, is sent again;
// passing, the batch is sent as two halves, each the same way. The sizes
// that went through bound every later request of the Embedder, so a
// limit is found once. A text still refused at minEmbedCut, or a refusal
// of another kind, is the error.
func (e *Embedder) embedFit(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := e.embed(ctx, texts)
	if err == nil || !tooLarge(err) {
		return vecs, err
	}
	if len(texts) == 1 {
		return e.embedCut(ctx, texts[0], err)
	}
	long := 0
	for i, t := range texts {
		if len(t) > len(texts[long]) {
			long = i
		}
	}
	bound := e.maxText.Load()
	if _, err := e.embedFit(ctx, texts[long:long+1]); err != nil {
		return nil, err
	}
	if e.maxText.Load() != bound { // it was cut: the texts were too long
		return e.embedFit(ctx, texts)
	}
	half := len(texts) / 2
	a, err := e.embedFit(ctx, texts[:half])
	if err != nil {
		return nil, err
	}
	lower(&e.batch, int64(half))
	b, err := e.embedFit(ctx, texts[half:])
	if err != nil {
		return nil, err
	}
	return append(a, b...), nil
}

// embedCut embeds a text the server refused (refusal) as too large, cut
// to half its length until it passes, and keeps that length as the bound
// of every later text.
func (e *Embedder) embedCut(ctx context.Context, text string, refusal error) ([][]float32, error) {
	t := e.cutText(text)
	for len(t) > minEmbedCut {
		t = cutUTF8(t, max(len(t)/2, minEmbedCut))
		vecs, err := e.embed(ctx, []string{t})
		if err == nil {
			lower(&e.maxText, int64(len(t)))
			return vecs, nil
		}
		if !tooLarge(err) {
			return nil, err
		}
	}
	if len(t) < len(text) {
		return nil, fmt.Errorf("%w (refused too when cut to %d bytes)", refusal, len(t))
	}
	return nil, refusal
}

// minEmbedCut is the shortest a text refused as too long is cut to (about
// 100 tokens: a tool's name and the start of its description).
const minEmbedCut = 400

// tooLarge says whether err is a refusal a smaller request may pass: a
// client error about the request's body (400, 413 Payload Too Large, 422
// as validating servers answer), not one about the key, the model or the
// rate.
func tooLarge(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// lower sets v to n when n is smaller (or v is unset).
func lower(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if old > 0 && old <= n {
			return
		}
		if v.CompareAndSwap(old, n) {
			return
		}
	}
}

// cutText is t within the longest text the server took, when it refused
// a longer one.
func (e *Embedder) cutText(t string) string {
	if m := int(e.maxText.Load()); m > 0 && len(t) > m {
		return cutUTF8(t, m)
	}
	return t
}

// cutUTF8 is s's first n bytes or fewer, ending at a character's end.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (e *Embedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	in := make([]string, len(texts))
	for i, t := range texts {
		t = e.cutText(t)
		if strings.TrimSpace(t) == "" {
			t = " "
		}
		in[i] = t
	}
	params := openai.EmbeddingNewParams{
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: in},
		Model:          e.cfg.Model,
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
	}
	a := &attempts{cfg: &e.cfg}
	res, err := e.svc.New(ctx, params, option.WithMiddleware(a.observe))
	if err != nil {
		return nil, e.failure(ctx, a, err)
	}
	if len(res.Data) != len(in) {
		return nil, nonRetryable(fmt.Errorf("llm: %d embeddings for %d inputs", len(res.Data), len(in)))
	}
	out := make([][]float32, len(in))
	for _, d := range res.Data {
		if d.Index < 0 || int(d.Index) >= len(in) || out[d.Index] != nil {
			return nil, nonRetryable(fmt.Errorf("llm: embedding index %d out of range or repeated", d.Index))
		}
		if len(d.Embedding) == 0 {
			return nil, nonRetryable(fmt.Errorf("llm: empty embedding at index %d", d.Index))
		}
		v := make([]float32, len(d.Embedding))
		for i, x := range d.Embedding {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, nonRetryable(fmt.Errorf("llm: embedding %d is not finite", d.Index))
			}
			v[i] = float32(x)
		}
		out[d.Index] = v
	}
	return out, nil
}

// failure classifies a failed request as Complete does: the caller's
// context, an undecodable reply (not retryable), a non-retryable error,
// a Retry-After beyond MaxRetryDelay, or retries used up.
func (e *Embedder) failure(ctx context.Context, a *attempts, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("llm: embeddings: %w", context.Cause(ctx))
	case a.last == nil:
		return nonRetryable(fmt.Errorf("llm: embeddings: %w", err))
	case errors.Is(a.last, ErrNonRetryable):
		return a.last
	case a.tooLong > 0:
		return fmt.Errorf("llm: embeddings: giving up after %s: %w (the provider asked to wait %s, beyond MaxRetryDelay %s)",
			attemptsText(a.n), a.last, a.tooLong, e.cfg.MaxRetryDelay)
	default:
		return fmt.Errorf("llm: embeddings: giving up after %s: %w", attemptsText(a.n), a.last)
	}
}
