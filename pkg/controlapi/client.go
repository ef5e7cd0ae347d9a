package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"k8s.io/utils/clock"
)

// RouteBootstrapCredentials is the bootstrap-credential route below the base
// URL (docs/control-api.md). It is also the route label of the metrics.
const RouteBootstrapCredentials = "/internal/v1/mcp-host/bootstrap-credentials"

// Defaults of Options. Together they bound one BootstrapCredential call to
// about 3 × 10 s of attempts plus two waits of at most 5 s.
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultMaxAttempts    = 3
	DefaultRetryBackoff   = 250 * time.Millisecond
	DefaultMaxRetryAfter  = 5 * time.Second
	// DefaultRetryAfterCap is the seed's refresh window
	// (HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC, 900).
	DefaultRetryAfterCap = 15 * time.Minute
	// DefaultMaxLifetime is HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC's default,
	// 30 days.
	DefaultMaxLifetime = 30 * 24 * time.Hour
	// MaxResponseBytes caps the body read from the Control API; a larger
	// 200 body is ErrInvalidResponse.
	MaxResponseBytes = 64 << 10
)

const (
	// maxBackoff caps the exponential backoff before jitter.
	maxBackoff = 2 * time.Second
	// tokenTTL is the lifetime of each signed bearer. A fresh token is
	// signed per attempt, so it only has to outlive one attempt plus the
	// clock skew the Control API allows.
	tokenTTL = MaxTokenTTL
)

// Code labels of Options.Observe for attempts without a usable status.
const (
	CodeInvalid  = "invalid"  // a 200 whose body was unusable (ResponseError)
	CodeTimeout  = "timeout"  // the attempt ran out of AttemptTimeout
	CodeError    = "error"    // a transport error
	CodeCanceled = "canceled" // the caller's context ended
)

// CredentialIssuer is the Control API as the Host controller uses it, so
// that its tests can inject a fake.
type CredentialIssuer interface {
	BootstrapCredential(ctx context.Context, req BootstrapRequest) (Credential, error)
}

var _ CredentialIssuer = (*Client)(nil)

// Options configure a Client. Zero values take the defaults.
type Options struct {
	// BaseURL is CONTROL_API_BASE_URL: an absolute http or https URL without
	// user info, query or fragment. A trailing slash is ignored.
	BaseURL string
	// HMACSecret is INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET. Required; New
	// keeps its own copy.
	HMACSecret []byte
	// HTTPClient sends the requests; nil means a client with a transport of
	// its own that ignores HTTP(S)_PROXY (the Control API is in-cluster,
	// and a proxy would see the bearer). Its CheckRedirect is replaced:
	// redirects are never followed, since one could carry the bearer to
	// another host.
	HTTPClient *http.Client
	// Clock signs iat/exp and judges expiresAt and Retry-After dates;
	// nil means the real clock.
	Clock clock.PassiveClock
	// AttemptTimeout bounds each request, body included.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the requests of one call, retries included.
	MaxAttempts int
	// RetryBackoff is the first wait before a retry; each further wait
	// doubles it, up to 2 s, and is jittered to between half and all of it.
	RetryBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for within
	// a call. A longer one ends the call with the StatusError carrying it.
	MaxRetryAfter time.Duration
	// RetryAfterCap is the longest Retry-After the client reports
	// (StatusError.RetryAfter): a longer one, up to 136 years in seconds or
	// an HTTP date, is reported as RetryAfterCap. The controller passes the
	// refresh window, so a Host is asked for again within it whatever the
	// Control API says.
	RetryAfterCap time.Duration
	// MaxLifetime is the longest credential lifetime accepted
	// (HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC): an answer expiring later is
	// ErrInvalidResponse. A credential that outlives its revocation by
	// years, or a Control API bug, is never stored.
	MaxLifetime time.Duration
	// MinLifetime is the shortest credential lifetime accepted: the refresh
	// window, HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC. A credential
	// expiring sooner is ErrExpiresTooSoon, so the controller does not
	// store it only to refresh it at once.
	MinLifetime time.Duration
	// Sleep waits d or until ctx ends, returning ctx's error then; nil
	// means a timer. Tests inject one that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
	// Observe, when set, is called once per attempt with the route, the
	// status code or one of the Code constants, and the attempt's duration.
	// (*Metrics).Observe fits.
	Observe func(route, code string, d time.Duration)
}

// Client calls the Control API. It is safe for concurrent use.
type Client struct {
	endpoint       string
	secret         []byte
	http           *http.Client
	clock          clock.PassiveClock
	attemptTimeout time.Duration
	maxAttempts    int
	retryBackoff   time.Duration
	maxRetryAfter  time.Duration
	retryAfterCap  time.Duration
	maxLifetime    time.Duration
	minLifetime    time.Duration
	sleep          func(context.Context, time.Duration) error
	observe        func(string, string, time.Duration)
}

// New validates o and returns a Client. Its errors never quote the URL or
// the secret.
func New(o Options) (*Client, error) {
	base := strings.TrimRight(o.BaseURL, "/")
	u, err := url.Parse(base)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, errors.New("controlapi: base URL must be an absolute http or https URL")
	case u.User != nil:
		// The user info would become Basic credentials, or leak into
		// the URL of a transport error.
		return nil, errors.New("controlapi: base URL must not embed credentials")
	case strings.ContainsAny(base, "?#"): // even an empty query or fragment
		return nil, errors.New("controlapi: base URL must not have a query or fragment")
	case len(o.HMACSecret) == 0:
		return nil, errors.New("controlapi: HMAC secret is empty")
	case o.AttemptTimeout < 0, o.MaxAttempts < 0, o.RetryBackoff < 0, o.MaxRetryAfter < 0, o.RetryAfterCap < 0, o.MinLifetime < 0, o.MaxLifetime < 0:
		return nil, errors.New("controlapi: negative timeout, attempt count, backoff or lifetime")
	case o.MaxLifetime > 0 && o.MaxLifetime <= o.MinLifetime:
		return nil, errors.New("controlapi: the maximum credential lifetime must exceed the minimum")
	}

	c := &Client{
		endpoint:       base + RouteBootstrapCredentials,
		secret:         bytes.Clone(o.HMACSecret),
		clock:          o.Clock,
		attemptTimeout: o.AttemptTimeout,
		maxAttempts:    o.MaxAttempts,
		retryBackoff:   o.RetryBackoff,
		maxRetryAfter:  o.MaxRetryAfter,
		retryAfterCap:  o.RetryAfterCap,
		maxLifetime:    o.MaxLifetime,
		minLifetime:    o.MinLifetime,
		sleep:          o.Sleep,
		observe:        o.Observe,
	}
	if o.HTTPClient != nil {
		hc := *o.HTTPClient
		c.http = &hc
	} else {
		c.http = &http.Client{Transport: defaultTransport()}
	}
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.attemptTimeout == 0 {
		c.attemptTimeout = DefaultAttemptTimeout
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = DefaultMaxAttempts
	}
	if c.retryBackoff == 0 {
		c.retryBackoff = DefaultRetryBackoff
	}
	if c.maxRetryAfter == 0 {
		c.maxRetryAfter = DefaultMaxRetryAfter
	}
	if c.retryAfterCap == 0 {
		c.retryAfterCap = DefaultRetryAfterCap
	}
	if c.maxLifetime == 0 {
		c.maxLifetime = DefaultMaxLifetime
		if c.maxLifetime <= c.minLifetime {
			return nil, errors.New("controlapi: the minimum credential lifetime must be below the default maximum")
		}
	}
	if c.sleep == nil {
		c.sleep = sleepContext
	}
	if c.observe == nil {
		c.observe = func(string, string, time.Duration) {}
	}
	return c, nil
}

func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxResponseHeaderBytes = MaxResponseBytes
	return t
}

// BootstrapRequest names the Host a credential is issued for.
type BootstrapRequest struct {
	Namespace string // HCC_TARGET_NAMESPACE
	HostRef   string // the Host's name
	HostUID   string // the Host's metadata.uid
}

// bootstrapBody is the request body, exactly the three members of
// docs/control-api.md.
type bootstrapBody struct {
	Namespace string `json:"namespace"`
	HostRef   string `json:"hostRef"`
	HostUID   string `json:"hostUid"`
}

// bootstrapResponse is the 200 body. Pointers tell a missing member from
// an empty one; other members are ignored, so the Control API may add some.
type bootstrapResponse struct {
	Credential *string `json:"credential"`
	ExpiresAt  *string `json:"expiresAt"`
}

// Credential is a bootstrap credential. Its String, GoString and
// MarshalJSON redact Value, so printing or logging one by mistake leaks
// nothing; the controller writes Value into the Secret directly.
type Credential struct {
	Value     string
	ExpiresAt time.Time
}

func (c Credential) String() string {
	return fmt.Sprintf("Credential{Value:<redacted>, ExpiresAt:%s}", c.ExpiresAt.Format(time.RFC3339))
}

func (c Credential) GoString() string { return c.String() }

// MarshalJSON writes only the expiry.
func (c Credential) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Value     string    `json:"value"`
		ExpiresAt time.Time `json:"expiresAt"`
	}{"<redacted>", c.ExpiresAt})
}

// BootstrapCredential asks the Control API for req's bootstrap credential.
// It retries transport errors, timeouts, 429 and 5xx up to MaxAttempts
// requests, waiting a jittered backoff or the server's Retry-After, and
// stops early when ctx ends. See the error classes of the package doc.
//
// A retried request may have been served already (its answer was lost);
// the Control API then issued a credential that nobody stores, which lapses
// at its expiry.
func (c *Client) BootstrapCredential(ctx context.Context, req BootstrapRequest) (Credential, error) {
	if req.Namespace == "" || req.HostRef == "" || req.HostUID == "" {
		return Credential{}, errors.New("controlapi: bootstrap request needs a namespace, host name and host UID")
	}
	body, err := json.Marshal(bootstrapBody(req))
	if err != nil {
		return Credential{}, fmt.Errorf("controlapi: encode request: %w", err)
	}
	for attempt := 1; ; attempt++ {
		cred, err := c.attempt(ctx, body)
		if err == nil {
			return cred, nil
		}
		setAttempts(err, attempt)
		if ctx.Err() != nil {
			return Credential{}, stopped(ctx, err)
		}
		if !errors.Is(err, ErrUnavailable) || attempt >= c.maxAttempts {
			return Credential{}, err
		}
		delay := c.backoff(attempt)
		var status *StatusError
		if errors.As(err, &status) && status.RetryAfter > 0 {
			if status.RetryAfter > c.maxRetryAfter {
				// Waiting that long would hold a worker; the caller can
				// requeue after RetryAfter instead.
				return Credential{}, err
			}
			delay = max(delay, status.RetryAfter)
		}
		if c.sleep(ctx, delay) != nil {
			return Credential{}, stopped(ctx, err)
		}
	}
}

// stopped adds ctx's end to err unless err already carries it.
func stopped(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w (stopped: %w)", err, ctxErr)
	}
	return err
}

// backoff is the wait after the attempt-th failure: RetryBackoff doubled
// per attempt, capped, then jittered to [d/2, d] so that many Hosts failing
// together do not retry in step.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.retryBackoff
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, max(maxBackoff, c.retryBackoff))
	half := d / 2
	return half + rand.N(d-half+1)
}

// attempt sends one request under its own timeout and reports it.
func (c *Client) attempt(ctx context.Context, body []byte) (Credential, error) {
	actx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	start := c.clock.Now()
	cred, code, err := c.exchange(ctx, actx, body)
	if code != "" {
		c.observe(RouteBootstrapCredentials, code, c.clock.Since(start))
	}
	return cred, err
}

// exchange performs one request and returns the metric code of its
// outcome ("" when nothing was sent).
func (c *Client) exchange(ctx, actx context.Context, body []byte) (Credential, string, error) {
	token, err := SignInternalToken(c.secret, c.clock.Now(), tokenTTL)
	if err != nil {
		return Credential{}, "", err
	}
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return Credential{}, "", errors.New("controlapi: build request")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")

	resp, err := c.http.Do(req)
	if err != nil {
		return Credential{}, transportCode(ctx, err), transportError(ctx, err)
	}
	defer func() { _ = resp.Body.Close() }()

	if resp.StatusCode != http.StatusOK {
		// The body is drained (bounded) for connection reuse, never read:
		// a server may echo the request, bearer included.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
		return Credential{}, strconv.Itoa(resp.StatusCode), &StatusError{
			Route:      RouteBootstrapCredentials,
			Code:       resp.StatusCode,
			RetryAfter: min(retryAfter(resp.Header.Get("Retry-After"), c.clock.Now()), c.retryAfterCap),
		}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return Credential{}, transportCode(ctx, err), transportError(ctx, err)
	}
	if len(data) > MaxResponseBytes {
		return Credential{}, CodeInvalid, invalidResponse(fmt.Sprintf("body exceeds %d bytes", MaxResponseBytes))
	}
	cred, err := c.parseCredential(data)
	if err != nil {
		return Credential{}, CodeInvalid, err
	}
	return cred, strconv.Itoa(resp.StatusCode), nil
}

// parseCredential decodes and checks a 200 body. Its reasons are fixed
// text: a JSON or time error would quote the body.
func (c *Client) parseCredential(data []byte) (Credential, error) {
	var r bootstrapResponse
	dec := json.NewDecoder(bytes.NewReader(data))
	if data = bytes.TrimSpace(data); len(data) == 0 || data[0] != '{' || dec.Decode(&r) != nil {
		return Credential{}, invalidResponse("body is not a JSON object with string members credential and expiresAt")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Credential{}, invalidResponse("data after the JSON object")
	}
	switch {
	case r.Credential == nil || *r.Credential == "":
		return Credential{}, invalidResponse("credential missing or empty")
	case strings.TrimSpace(*r.Credential) != *r.Credential || strings.IndexFunc(*r.Credential, unicode.IsControl) >= 0:
		// mcp-host reads it from a file; surrounding space or a line
		// break would be read differently by different readers.
		return Credential{}, invalidResponse("credential has surrounding space or control characters")
	case r.ExpiresAt == nil:
		return Credential{}, invalidResponse("expiresAt missing")
	}
	expiresAt, err := time.Parse(time.RFC3339, *r.ExpiresAt)
	if err != nil {
		return Credential{}, invalidResponse("expiresAt is not an RFC 3339 time")
	}
	expiresAt = expiresAt.UTC()
	now := c.clock.Now()
	if !expiresAt.After(now) {
		return Credential{}, expiresTooSoon(expiresAt, "already past")
	}
	if expiresAt.Sub(now) <= c.minLifetime {
		return Credential{}, expiresTooSoon(expiresAt, fmt.Sprintf("within the minimum lifetime of %s", c.minLifetime))
	}
	if expiresAt.Sub(now) > c.maxLifetime {
		// Sub saturates: the year 9999 is beyond it too.
		return Credential{}, invalidResponse(fmt.Sprintf("credential expires at %s, beyond the maximum lifetime of %s",
			expiresAt.Format(time.RFC3339), c.maxLifetime))
	}
	return Credential{Value: *r.Credential, ExpiresAt: expiresAt}, nil
}

func invalidResponse(reason string) error {
	return &ResponseError{Route: RouteBootstrapCredentials, Reason: reason}
}

func expiresTooSoon(at time.Time, why string) error {
	return &ResponseError{
		Route:     RouteBootstrapCredentials,
		Reason:    fmt.Sprintf("credential expires at %s, %s", at.Format(time.RFC3339), why),
		ExpiresAt: at,
	}
}

// transportError wraps an error of the transport or of reading the body.
// The attempt's own deadline is a timeout; the caller's is not.
func transportError(ctx context.Context, err error) error {
	return &TransportError{
		Route:   RouteBootstrapCredentials,
		Timeout: transportCode(ctx, err) == CodeTimeout,
		Err:     err,
	}
}

func transportCode(ctx context.Context, err error) string {
	var netErr net.Error
	switch {
	case ctx.Err() != nil:
		return CodeCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return CodeTimeout
	}
	return CodeError
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3). Anything else, and a date already past, is zero.
func retryAfter(value string, now time.Time) time.Duration {
	if value == "" {
		return 0
	}
	if seconds, err := strconv.ParseUint(value, 10, 32); err == nil {
		return time.Duration(seconds) * time.Second
	}
	if at, err := http.ParseTime(value); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
