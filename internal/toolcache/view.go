package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/jetagent/jetagent/internal/redact"
)

// View is what one job sees of the pool: the tools of the servers it named,
// filtered by its allow/deny globs, and its own sessions for per-job servers.
// Close it when the job ends.
type View struct {
	p       *Pool
	jobID   string
	servers map[string]bool // nil: all
	allow   []string
	deny    []string

	mu       sync.Mutex
	closed   bool
	perJob   map[string]*jobSession
	lastSnap *snapshot
	reg      *Registry
	// filter is the view's subset of the pool's shared search index
	// (nil with filterIx set: every tool).
	filter   *Filter
	filterIx *SearchIndex
	// offered is the catalog version the job was offered (its first
	// CatalogKey or Registry): a name it gave one server's tool that the
	// pool now gives another server's is that tool gone, not the other
	// (the job's arguments were written, and checked, for the first).
	offered *snapshot
}

// jobSession is a View's own session to a per-job server.
type jobSession struct {
	mu sync.Mutex // held while connecting, so concurrent first calls share one
	s  *session
}

// View returns the view for one job. servers are names from the operator's
// config (nil: every enabled server); a name that is not configured or is
// disabled is ErrUnknownServer. allow/deny are globs over tool names (the
// model-facing Name or the server's Original).
func (p *Pool) View(jobID string, servers []string, allow, deny []string) (*View, error) {
	if err := checkGlobs("allow", allow); err != nil {
		return nil, opError("job "+jobID, err)
	}
	if err := checkGlobs("deny", deny); err != nil {
		return nil, opError("job "+jobID, err)
	}
	v := &View{p: p, jobID: jobID, allow: allow, deny: deny, perJob: map[string]*jobSession{}}
	if servers != nil {
		v.servers = map[string]bool{}
		for _, name := range servers {
			if _, off := p.disabled[name]; off {
				return nil, opError("job "+jobID, fmt.Errorf("%w: %q is disabled", ErrUnknownServer, name))
			}
			if !p.HasServer(name) {
				return nil, opError("job "+jobID, fmt.Errorf("%w: %q", ErrUnknownServer, name))
			}
			v.servers[name] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, opError("job "+jobID, ErrClosed)
	}
	p.views[v] = struct{}{}
	return v, nil
}

// Registry is the view's catalog: the pool's tools (same names) that this
// job may use. It is rebuilt when the pool's catalog changes.
func (v *View) Registry() *Registry {
	snap := v.p.registry.current()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.offered == nil {
		v.offered = snap
	}
	if v.reg != nil && v.lastSnap == snap {
		return v.reg
	}
	var tools []Tool
	for _, t := range snap.tools {
		if v.keeps(t) {
			tools = append(tools, t)
		}
	}
	r := &Registry{}
	r.snap.Store(newSnapshot(tools))
	v.reg, v.lastSnap = r, snap
	return r
}

// CatalogKey identifies what the view offers without building it: the
// pool's catalog version (Registry.Version) and the view's selection (its
// servers, allow and deny globs). Views with equal keys offer the same
// tools, so work derived from Tools can be shared between them; the
// version changes when the pool's catalog does.
func (v *View) CatalogKey() (version uint64, selection string) {
	snap := v.p.registry.current()
	version = snap.version
	v.mu.Lock()
	if v.offered == nil {
		v.offered = snap
	}
	v.mu.Unlock()
	var b strings.Builder
	if v.servers != nil {
		names := make([]string, 0, len(v.servers))
		for n := range v.servers {
			names = append(names, n)
		}
		sort.Strings(names)
		b.WriteString("servers")
		for _, n := range names {
			b.WriteString("\x00" + n)
		}
	}
	for _, g := range [][]string{v.allow, v.deny} {
		b.WriteString("\x01")
		for _, p := range g {
			b.WriteString("\x00" + p)
		}
	}
	return version, b.String()
}

// Tools lists the view's tools, sorted by name.
func (v *View) Tools() []Tool { return v.Registry().List() }

// Get returns one of the view's tools by name: the pool's tool, when the
// view keeps it (no copy of the view's catalog is built for a lookup).
func (v *View) Get(name string) (Tool, bool) {
	t, ok := v.p.registry.Get(name)
	if !ok || !v.keeps(t) {
		return Tool{}, false
	}
	return t, true
}

// Search ranks the view's tools for a query (see Registry.Search), on the
// pool's shared index.
func (v *View) Search(query string, limit int) []Tool {
	res := v.SearchTools(query, SearchOptions{Limit: limit, NoFallback: true})
	out := make([]Tool, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.Tool
	}
	return out
}

// SearchTools ranks the view's tools on the pool's search index, which is
// built once per catalog version and shared by every job: the view only
// filters it by its servers and allow/deny globs (computed once per catalog
// version). opts.Filter is set by the view.
func (v *View) SearchTools(query string, opts SearchOptions) SearchResult {
	ix := v.p.registry.Index()
	opts.Filter = v.filterOf(ix)
	return ix.Search(query, opts)
}

// SearchToolsContext is SearchTools with the hybrid ranking once the pool
// has one for the current catalog version (Pool.EnableSemantic;
// SemanticIndex.Search), filtered the same way. The query is embedded
// within ctx; when it cannot be, the answer is BM25F's with SemanticErr
// set. Until the version's tool vectors are ready, or when computing them
// failed, it is SearchTools.
func (v *View) SearchToolsContext(ctx context.Context, query string, opts SearchOptions) SearchResult {
	snap := v.p.registry.current()
	ix := snap.searchIndex()
	opts.Filter = v.filterOf(ix)
	if sem := snap.semantic.Load(); sem != nil && sem.Index() == ix {
		return sem.Search(ctx, query, opts)
	}
	return ix.Search(query, opts)
}

// filterOf is the view's filter of ix (nil: every tool), computed once
// per catalog version.
func (v *View) filterOf(ix *SearchIndex) *Filter {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.filterIx != ix {
		v.filterIx, v.filter = ix, nil
		if v.servers != nil || len(v.allow) > 0 || len(v.deny) > 0 {
			v.filter = ix.Filter(v.keeps)
		}
	}
	return v.filter
}

// keeps says whether the view offers t.
func (v *View) keeps(t Tool) bool {
	if v.servers != nil && !v.servers[t.Server] {
		return false
	}
	return globsAllow(v.allow, v.deny, t.Name, t.Original)
}

// CallTool calls a tool by its registry name. Cancelling ctx abandons the
// call and sends notifications/cancelled to the server. A call in flight when
// the session breaks fails with ErrSessionLost; the next call waits for the
// reconnected session.
func (v *View) CallTool(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	return v.CallToolChecked(ctx, name, args, nil)
}

// CallToolChecked is CallTool with check, when not nil, run on the result
// as the server sent it, before the pool's answer secrets are masked in
// it (see answerSecrets), and only when the call succeeded: what check
// returns is masked and returned. Checking the tool's result against its
// outputSchema belongs there: a masked value ("xxxxx" for a token a
// "pattern", a "minLength" or an "enum" describes) can fail a schema the
// server's answer meets, and a violation's message may quote the value,
// which is masked with the rest.
func (v *View) CallToolChecked(ctx context.Context, name string, args json.RawMessage, check func(Result) Result) (Result, error) {
	res, err := v.callTool(ctx, name, args)
	if err == nil && check != nil {
		res = check(res)
	}
	return v.p.maskResult(res), scrub(opError("call "+name, err), v.p.secrets)
}

// offeredTool is the tool the catalog the job was offered gave name, when
// the view keeps it.
func (v *View) offeredTool(name string) (Tool, bool) {
	v.mu.Lock()
	s := v.offered
	v.mu.Unlock()
	if s == nil {
		return Tool{}, false
	}
	i, ok := s.byName[name]
	if !ok || !v.keeps(s.tools[i]) {
		return Tool{}, false
	}
	return s.tools[i], true
}

// MaskSecrets is s with the credentials of the pool's servers' configs
// masked, as in the errors of calls (the rule of errors and logs, not the
// narrower one of answers). The loop masks with it what it shows of a
// panic it recovered in a call (agentloop's secretMasker): the panic's
// value can quote what the panicking code held, and it bypassed the
// masking of the call's error.
func (v *View) MaskSecrets(s string) string { return redact.Text(s, v.p.secrets) }

func (v *View) callTool(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	t, ok := v.Get(name)
	if !ok {
		// A job's tools are those of the catalog when it started: a tool
		// renamed since (another server's new tool took its name, so both
		// are server-qualified now) is still the one it was offered.
		t, ok = v.p.registry.renamed(name)
		ok = ok && v.keeps(t)
	}
	if was, offered := v.offeredTool(name); ok && offered && (was.Server != t.Server || was.Original != t.Original) {
		// The server that listed it dropped it, and another server's tool
		// now has its name: calling that one would run another tool with
		// arguments meant for this one.
		return Result{}, fmt.Errorf("%w: %q: its server %q no longer lists it (removed after this job's tools were listed; the tool of that name now is %q's, another tool)",
			ErrUnknownTool, name, was.Server, t.Server)
	}
	if !ok {
		if gone, removed := v.p.registry.removedTool(name); removed && v.keeps(gone) {
			// The job was offered it, and its server's list has dropped
			// it since: "unknown" alone would not say why a tool of the
			// job's tools array is refused.
			return Result{}, fmt.Errorf("%w: %q: its server %q no longer lists it (removed after this job's tools were listed)", ErrUnknownTool, name, gone.Server)
		}
		return Result{}, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	c := v.p.conns[t.Server]
	if d := time.Duration(c.cfg.CallTimeout); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, &callTimeoutError{d})
		defer cancel()
	}
	res, err := v.callOn(ctx, c, t, args)
	var ct *callTimeoutError
	if errors.Is(err, context.DeadlineExceeded) && errors.As(context.Cause(ctx), &ct) && !errors.As(err, &ct) {
		// mcp-go reports the bare "context deadline exceeded": say whose
		// limit it was, so the model and the operator need not guess.
		err = fmt.Errorf("%w (%w)", err, ct)
	}
	return res, err
}

// callTimeoutError is the cause of a call's context ended by its server's
// callTimeout.
type callTimeoutError struct{ d time.Duration }

func (e *callTimeoutError) Error() string {
	return fmt.Sprintf("no answer within the server's callTimeout of %s", e.d)
}

// callOn calls t on a session of c.
func (v *View) callOn(ctx context.Context, c *serverConn, t Tool, args json.RawMessage) (Result, error) {
	s, err := v.session(ctx, c)
	if err != nil {
		return Result{}, err
	}
	res, err := s.callTool(ctx, t.Original, args)
	var notSent *notSentError
	if errors.Is(err, ErrSessionLost) && errors.Is(err, transport.ErrSessionTerminated) || errors.As(err, &notSent) {
		// The server answered 404 for an expired HTTP session: the request
		// was refused, not run; or the session broke while the call waited
		// for a free slot. It is safe to send again on a new session.
		s, err2 := v.session(ctx, c)
		if err2 != nil {
			return Result{}, err2 // not run; why there is no session is the news
		}
		return s.callTool(ctx, t.Original, args)
	}
	return res, err
}

// session returns the session a call to c's server goes through.
func (v *View) session(ctx context.Context, c *serverConn) (*session, error) {
	if c.cfg.SessionMode != SessionPerJob {
		return c.acquire(ctx)
	}
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil, ErrClosed
	}
	js := v.perJob[c.name]
	if js == nil {
		js = &jobSession{}
		v.perJob[c.name] = js
	}
	v.mu.Unlock()
	js.mu.Lock()
	defer js.mu.Unlock()
	if js.s != nil && !js.s.isDead() {
		return js.s, nil
	}
	if js.s != nil {
		_ = js.s.close()
		js.s = nil
	}
	s, err := v.p.dialer.dial(ctx, c.name, c.cfg, c.inproc)
	if err != nil {
		return nil, fmt.Errorf("%w: server %q (per-job session): %w", ErrServerUnavailable, c.name, err)
	}
	v.mu.Lock()
	closed := v.closed
	v.mu.Unlock()
	if closed {
		_ = s.close()
		return nil, ErrClosed
	}
	js.s = s
	return s, nil
}

// ListResources lists the resources and resource templates of the view's
// servers. A server that fails is skipped when others answer.
func (v *View) ListResources(ctx context.Context) ([]Resource, error) {
	rs, err := v.listResources(ctx)
	for i := range rs {
		rs[i] = v.p.maskResource(rs[i])
	}
	return rs, scrub(opError("list resources", err), v.p.secrets)
}

func (v *View) listResources(ctx context.Context) ([]Resource, error) {
	names := v.serverNames()
	type listing struct {
		rs  []Resource
		err error
	}
	lists := make([]listing, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lists[i].rs, lists[i].err = v.serverResources(ctx, v.p.conns[name])
		}()
	}
	wg.Wait()
	var out []Resource
	var errs []error
	for _, l := range lists {
		if l.err != nil {
			errs = append(errs, l.err)
			continue
		}
		out = append(out, l.rs...)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// serverResources lists one server's resources within the connect timeout:
// every job lists its servers' resources before its first model request,
// and a server that never answered resources/list (but answered pings, so
// it was never replaced) held each job until the job's timeout.
func (v *View) serverResources(ctx context.Context, c *serverConn) ([]Resource, error) {
	ctx, cancel := context.WithTimeout(ctx, v.p.opts.ConnectTimeout)
	defer cancel()
	s, err := v.sessionNow(ctx, c)
	if err != nil {
		return nil, err
	}
	return s.listResources(ctx)
}

// sessionNow is session without waiting for a shared session being
// (re)connected: a listing loses that server's resources rather than hold
// the job for the attempt.
func (v *View) sessionNow(ctx context.Context, c *serverConn) (*session, error) {
	if c.cfg.SessionMode == SessionPerJob {
		return v.session(ctx, c)
	}
	c.mu.Lock()
	s, state, lastErr := c.sess, c.state, c.lastErr
	c.mu.Unlock()
	switch {
	case s != nil:
		return s, nil
	case state == StateClosed:
		return nil, ErrClosed
	case lastErr != nil:
		return nil, fmt.Errorf("%w: server %q is %s: %w", ErrServerUnavailable, c.name, state, lastErr)
	}
	return nil, fmt.Errorf("%w: server %q is %s", ErrServerUnavailable, c.name, state)
}

// ReadResource reads a resource by URI or by its listed name. A URI that no
// server lists (e.g. one built from a template) is tried on each server with
// resources until one answers.
func (v *View) ReadResource(ctx context.Context, uriOrName string) (string, error) {
	text, err := v.readResource(ctx, uriOrName)
	return v.p.maskText(text), scrub(opError("read resource "+uriOrName, err), v.p.secrets)
}

func (v *View) readResource(ctx context.Context, uriOrName string) (string, error) {
	listed, err := v.listResources(ctx)
	if err != nil {
		return "", err
	}
	for _, r := range listed {
		shown := v.p.maskResource(r) // as ListResources listed it
		if r.URI != "" && (r.URI == uriOrName || r.Name == uriOrName || shown.URI == uriOrName || shown.Name == uriOrName) {
			s, err := v.session(ctx, v.p.conns[r.Server])
			if err != nil {
				return "", err
			}
			return s.readResource(ctx, r.URI)
		}
	}
	var errs []error
	for _, name := range v.serverNames() {
		s, err := v.sessionNow(ctx, v.p.conns[name])
		if err != nil || s.caps.Resources == nil {
			continue
		}
		text, err := s.readResource(ctx, uriOrName)
		if err == nil {
			return text, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", errors.New("no server in this job has it")
	}
	return "", errors.Join(errs...)
}

// Unavailable lists the view's servers that offer it no tools because
// they are not connected and list none: they failed to connect, or are
// still (re)connecting, since before they ever listed a tool. Their tools
// are missing from the catalog, not unknown, and a model calling one
// should be told so. A server that listed its tools before it went down
// keeps offering them (their calls fail with ErrServerUnavailable), and
// one that is up with no tools is not unavailable. Sorted by name; errors
// are redacted as in Status.
func (v *View) Unavailable() []ServerStatus {
	var out []ServerStatus
	for _, name := range v.serverNames() {
		st := v.p.conns[name].status()
		if st.Tools > 0 || st.State == StateReady || st.State == StateClosed {
			continue
		}
		st.Error = redact.Text(st.Error, v.p.secrets)
		out = append(out, st)
	}
	return out
}

func (v *View) serverNames() []string {
	var out []string
	for _, name := range v.p.names {
		if v.servers == nil || v.servers[name] {
			out = append(out, name)
		}
	}
	return out
}

// Close releases the view's per-job sessions. Shared sessions stay open.
func (v *View) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	sessions := v.perJob
	v.perJob = nil
	v.mu.Unlock()
	v.p.mu.Lock()
	delete(v.p.views, v)
	v.p.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(sessions))
	var emu sync.Mutex
	for _, js := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			js.mu.Lock()
			defer js.mu.Unlock()
			if js.s != nil {
				if err := js.s.close(); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
				js.s = nil
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
