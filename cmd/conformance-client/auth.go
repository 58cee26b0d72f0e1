package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client/transport"
)

// authScenarios are the OAuth scenarios this client attempts. All of them end
// the same way once authorised: tools/list, then a call of test-tool.
var authScenarios = []string{
	"auth/metadata-default",
	"auth/metadata-var1",
	"auth/metadata-var2",
	"auth/metadata-var3",
	"auth/basic-cimd",
	"auth/scope-from-www-authenticate",
	"auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined",
	"auth/scope-step-up",
	"auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic",
	"auth/token-endpoint-auth-post",
	"auth/token-endpoint-auth-none",
	"auth/pre-registration",
	"auth/2025-03-26-oauth-metadata-backcompat",
	"auth/2025-03-26-oauth-endpoint-fallback",
	// draft scenarios, not in the core suite
	"auth/resource-mismatch",
	"auth/offline-access-scope",
	"auth/offline-access-not-supported",
}

const (
	// redirectURI is never served: the suite's authorization server answers
	// the authorization request with a 302 to it, and the code is read from
	// the Location header.
	redirectURI = "http://localhost:3000/callback"
	// cimdClientID is the client metadata document URL the suite expects a
	// client to use as its client_id when the server supports CIMD.
	cimdClientID = "https://conformance-test.local/client-metadata.json"
	// maxAuthorizations bounds re-authorization on repeated 401/403, as the
	// scope-retry-limit scenario demands.
	maxAuthorizations = 3
)

// challengeRecorder is an http.RoundTripper that remembers the last
// WWW-Authenticate challenge of a 401 or 403, which mcp-go does not expose.
type challengeRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	last string
}

func (r *challengeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		r.mu.Lock()
		r.last = strings.Join(resp.Header.Values("WWW-Authenticate"), ", ")
		r.mu.Unlock()
	}
	return resp, err
}

// take returns the recorded challenge and forgets it.
func (r *challengeRecorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.last
	r.last = ""
	return last
}

// preRegistered is the MCP_CONFORMANCE_CONTEXT of auth/pre-registration.
type preRegistered struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// authorizedToolCall connects without credentials, and on each 401 or 403
// challenge runs the authorization code flow with PKCE through mcp-go's
// OAuthHandler, then reconnects with the token.
func authorizedToolCall(ctx context.Context, e *env) error {
	rec := &challengeRecorder{next: http.DefaultTransport}
	httpc := &http.Client{Transport: rec}
	var creds preRegistered
	if e.context != "" {
		if err := json.Unmarshal([]byte(e.context), &creds); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	store := transport.NewMemoryTokenStore()
	var cfg *transport.OAuthConfig // nil until the first challenge
	for attempt := 0; ; attempt++ {
		topts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(httpc)}
		if cfg != nil {
			topts = append(topts, transport.WithHTTPOAuth(*cfg))
		}
		err := func() error {
			c, err := connect(ctx, e, topts)
			if err != nil {
				return err
			}
			defer c.Close()
			return listAndCall(ctx, e, c, "test-tool", map[string]any{})
		}()
		challenge := rec.take()
		if err == nil {
			return nil
		}
		// mcp-go surfaces a 403 insufficient_scope as a JSON-RPC error, so
		// the recorded challenge is what tells an auth failure apart.
		if challenge == "" {
			return err
		}
		if attempt == maxAuthorizations {
			return fmt.Errorf("still unauthorized after %d authorizations: %w", attempt, err)
		}
		e.log.Info("authorization required", "challenge", challenge, "err", err)
		if cfg, err = authorize(ctx, e, httpc, store, creds, challenge); err != nil {
			return fmt.Errorf("authorize: %w", err)
		}
		// A step-up reuses the registration.
		creds = preRegistered{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret}
	}
}

// authorize runs one authorization code flow for the challenge and leaves the
// token in store. It returns the configuration to connect with.
func authorize(ctx context.Context, e *env, httpc *http.Client, store transport.TokenStore, creds preRegistered, challenge string) (*transport.OAuthConfig, error) {
	params := challengeParams(challenge)
	cfg := transport.OAuthConfig{
		ClientID:     creds.ClientID,
		ClientSecret: creds.ClientSecret,
		RedirectURI:  redirectURI,
		TokenStore:   store,
		PKCEEnabled:  true,
		HTTPClient:   httpc,
	}
	// mcp-go discovers the metadata itself, and binds the advertised URL more
	// strictly than one it derives, so it gets only the advertised one. This
	// client reads the document too, for scopes_supported and CIMD support.
	cfg.ProtectedResourceMetadataURL = params["resource_metadata"]
	prmURL, prm := discoverPRM(ctx, httpc, e.url, params["resource_metadata"])
	e.log.Info("protected resource metadata", "url", prmURL, "found", prm != nil)
	// Scope: the challenge's, else what the resource says it supports, else none.
	if s := params["scope"]; s != "" {
		cfg.Scopes = strings.Fields(s)
	} else if ss, ok := prm["scopes_supported"].([]any); ok {
		for _, s := range ss {
			if str, ok := s.(string); ok {
				cfg.Scopes = append(cfg.Scopes, str)
			}
		}
	}
	h := transport.NewOAuthHandler(cfg)
	h.SetBaseURL(baseURL(e.url))
	if cfg.ClientID == "" {
		if supportsCIMD(ctx, httpc, prm) {
			// A URL client_id needs no registration; the AS fetches the document.
			cfg.ClientID = cimdClientID
			h = transport.NewOAuthHandler(cfg)
			h.SetBaseURL(baseURL(e.url))
		} else if err := h.RegisterClient(ctx, clientInfo.Name); err != nil {
			return nil, fmt.Errorf("register client: %w", err)
		}
	}
	verifier, err := transport.GenerateCodeVerifier()
	if err != nil {
		return nil, err
	}
	state, err := transport.GenerateState()
	if err != nil {
		return nil, err
	}
	authURL, err := h.GetAuthorizationURL(ctx, state, transport.GenerateCodeChallenge(verifier))
	if err != nil {
		return nil, fmt.Errorf("authorization URL: %w", err)
	}
	code, gotState, err := followAuthorization(ctx, httpc, authURL)
	if err != nil {
		return nil, err
	}
	if err := h.ProcessAuthorizationResponse(ctx, code, gotState, verifier); err != nil {
		return nil, fmt.Errorf("token exchange: %w", err)
	}
	// Keep whatever DCR issued, so the next handler needs no registration.
	cfg.ClientID = h.GetClientID()
	cfg.ClientSecret = h.GetClientSecret()
	cfg.TokenEndpointAuthMethod = h.GetTokenEndpointAuthMethod()
	return &cfg, nil
}

// followAuthorization requests the authorization URL and reads code and state
// from the redirect, standing in for a browser and a user who consents.
func followAuthorization(ctx context.Context, httpc *http.Client, authURL string) (code, state string, err error) {
	noRedirect := *httpc
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", "", err
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("authorization request: %w", err)
	}
	defer resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return "", "", fmt.Errorf("authorization request: status %d, no redirect: %s", resp.StatusCode, body)
	}
	q := loc.Query()
	if q.Get("error") != "" {
		return "", "", fmt.Errorf("authorization denied: %s %s", q.Get("error"), q.Get("error_description"))
	}
	return q.Get("code"), q.Get("state"), nil
}

// discoverPRM fetches the protected resource metadata (RFC 9728) from where
// mcp-go looks for it: the URL the challenge names, else the path-suffixed
// well-known URL.
func discoverPRM(ctx context.Context, httpc *http.Client, serverURL, advertised string) (string, map[string]any) {
	candidates := []string{advertised}
	if u, err := url.Parse(serverURL); err == nil {
		path := strings.TrimSuffix(u.Path, "/")
		u.RawQuery, u.Fragment = "", ""
		u.Path = "/.well-known/oauth-protected-resource" + path
		candidates = append(candidates, u.String())
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if prm, err := fetchJSON(ctx, httpc, c); err == nil {
			return c, prm
		}
	}
	return "", nil
}

// supportsCIMD reports whether the first authorization server in the
// protected resource metadata accepts client ID metadata documents; mcp-go's
// AuthServerMetadata has no field for it.
func supportsCIMD(ctx context.Context, httpc *http.Client, prm map[string]any) bool {
	servers, _ := prm["authorization_servers"].([]any)
	if len(servers) == 0 {
		return false
	}
	issuer, _ := servers[0].(string)
	u, err := url.Parse(issuer)
	if err != nil {
		return false
	}
	// RFC 8414 §3.1: the well-known segment goes before the issuer's path.
	u.Path = "/.well-known/oauth-authorization-server" + strings.TrimSuffix(u.Path, "/")
	md, err := fetchJSON(ctx, httpc, u.String())
	if err != nil {
		return false
	}
	ok, _ := md["client_id_metadata_document_supported"].(bool)
	return ok
}

func fetchJSON(ctx context.Context, httpc *http.Client, u string) (map[string]any, error) {
	if u == "" {
		return nil, errors.New("no URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", u, resp.StatusCode)
	}
	var m map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return m, nil
}

// baseURL is the server URL without query or fragment, as mcp-go's transport
// sets it on its own OAuth handler.
func baseURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// challengeParams parses the auth-params of a Bearer challenge
// (RFC 6750 §3), such as resource_metadata, scope and error.
func challengeParams(header string) map[string]string {
	params := map[string]string{}
	s := strings.TrimSpace(header)
	if i := strings.IndexByte(s, ' '); i >= 0 && !strings.Contains(s[:i], "=") {
		s = s[i+1:] // drop the scheme
	}
	for s != "" {
		s = strings.TrimLeft(s, " ,")
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			break
		}
		key := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = s[eq+1:]
		var val string
		if strings.HasPrefix(s, `"`) {
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			val = strings.ReplaceAll(s[1:min(end, len(s))], `\"`, `"`)
			s = s[min(end+1, len(s)):]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val = strings.TrimSpace(s[:end])
			s = s[end:]
		}
		params[key] = val
	}
	return params
}
