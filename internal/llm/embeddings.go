package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

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
// EmbedBatch texts. An empty text is sent as one space (the API refuses
// empty inputs). Every vector has the same length, or Embed fails.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += EmbedBatch {
		batch := texts[start:min(start+EmbedBatch, len(texts))]
		vecs, err := e.embed(ctx, batch)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	for _, v := range out {
		if len(v) != len(out[0]) {
			return nil, nonRetryable(fmt.Errorf("llm: embeddings of different lengths (%d and %d)", len(out[0]), len(v)))
		}
	}
	return out, nil
}

func (e *Embedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	in := make([]string, len(texts))
	for i, t := range texts {
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
