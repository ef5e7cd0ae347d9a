package controlapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

var (
	testSecret  = []byte("test-hmac-secret-0123456789abcdef0123456789")
	testNow     = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	testRequest = BootstrapRequest{Namespace: "mcp-host", HostRef: "host-a", HostUID: "6f1c0b52-9d1e-4a57-8f61-2b8e3c1d7a90"}
)

const testCredential = "bootstrap-credential-7d3f9a61c2"

// recorded is one request as the fake Control API saw it.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// harness is a fake Control API and a client of it sharing a fake clock.
// Its Sleep advances the clock instead of waiting, and records the wait.
type harness struct {
	clock    *testingclock.FakeClock
	server   *httptest.Server
	calls    atomic.Int32
	mu       sync.Mutex
	requests []recorded
	sleeps   []time.Duration
	observed []string // "route code" per attempt
}

// newHarness serves handler, which gets the 1-based number of the call.
func newHarness(t *testing.T, handler func(h *harness, w http.ResponseWriter, r *http.Request, call int)) *harness {
	t.Helper()
	h := &harness{clock: testingclock.NewFakeClock(testNow)}
	h.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.requests = append(h.requests, recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
		h.mu.Unlock()
		handler(h, w, r, int(h.calls.Add(1)))
	}))
	t.Cleanup(h.server.Close)
	return h
}

// client returns a client of the fake with test defaults, changed by edit.
func (h *harness) client(t *testing.T, edit func(*Options)) *Client {
	t.Helper()
	o := Options{
		BaseURL:    h.server.URL,
		HMACSecret: testSecret,
		HTTPClient: h.server.Client(),
		Clock:      h.clock,
		Sleep: func(ctx context.Context, d time.Duration) error {
			h.mu.Lock()
			h.sleeps = append(h.sleeps, d)
			h.mu.Unlock()
			h.clock.Step(d)
			return ctx.Err()
		},
		Observe: func(route, code string, _ time.Duration) {
			h.mu.Lock()
			h.observed = append(h.observed, route+" "+code)
			h.mu.Unlock()
		},
	}
	if edit != nil {
		edit(&o)
	}
	c, err := New(o)
	require.NoError(t, err)
	return c
}

func (h *harness) recordedSleeps() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.sleeps...)
}

func (h *harness) recordedCodes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.observed...)
}

// issue answers 200 with testCredential, valid for a day.
func issue(h *harness, w http.ResponseWriter) {
	respond(w, http.StatusOK, fmt.Sprintf(`{"credential":%q,"expiresAt":%q}`,
		testCredential, h.clock.Now().Add(24*time.Hour).Format(time.RFC3339)))
}

func respond(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

func status(code int) func(*harness, http.ResponseWriter, *http.Request, int) {
	return func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) {
		respond(w, code, `{"error":"x"}`)
	}
}

func TestBootstrapCredentialSendsTheContractRequest(t *testing.T) {
	h := newHarness(t, func(h *harness, w http.ResponseWriter, _ *http.Request, _ int) { issue(h, w) })
	// A path prefix and a trailing slash on the base URL are kept and
	// dropped respectively.
	c := h.client(t, func(o *Options) { o.BaseURL = h.server.URL + "/prefix/" })

	cred, err := c.BootstrapCredential(context.Background(), testRequest)
	require.NoError(t, err)
	assert.Equal(t, Credential{Value: testCredential, ExpiresAt: testNow.Add(24 * time.Hour)}, cred)

	require.Len(t, h.requests, 1)
	req := h.requests[0]
	assert.Equal(t, http.MethodPost, req.method)
	assert.Equal(t, "/prefix/internal/v1/mcp-host/bootstrap-credentials", req.path)
	assert.Equal(t, "application/json", req.header.Get("Content-Type"))
	assert.Equal(t, `{"namespace":"mcp-host","hostRef":"host-a","hostUid":"6f1c0b52-9d1e-4a57-8f61-2b8e3c1d7a90"}`, string(req.body))

	auth := req.header.Values("Authorization")
	require.Len(t, auth, 1)
	token, ok := strings.CutPrefix(auth[0], "Bearer ")
	require.True(t, ok, "Authorization is a bearer")
	claims, err := VerifyInternalToken(token, testSecret, h.clock.Now())
	require.NoError(t, err)
	assert.Equal(t, testNow, claims.IssuedAt)
	assert.Equal(t, testNow.Add(60*time.Second), claims.Expiry)
	assert.NotEmpty(t, claims.ID)

	header, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	require.NoError(t, err)
	assert.Equal(t, `{"alg":"HS256","typ":"JWT"}`, string(header))
	var payload map[string]any
	require.NoError(t, json.Unmarshal(mustSegment(t, token, 1), &payload))
	assert.Equal(t, "host-context-controller", payload["iss"])
	assert.Equal(t, "control-api", payload["aud"])
	assert.Equal(t, []string{RouteBootstrapCredentials + " 200"}, h.recordedCodes())
}

func TestBootstrapCredentialSignsAFreshTokenPerAttempt(t *testing.T) {
	h := newHarness(t, func(h *harness, w http.ResponseWriter, _ *http.Request, call int) {
		if call == 1 {
			respond(w, http.StatusServiceUnavailable, "")
			return
		}
		issue(h, w)
	})
	_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
	require.NoError(t, err)
	require.Len(t, h.requests, 2)
	first, second := h.requests[0].header.Get("Authorization"), h.requests[1].header.Get("Authorization")
	assert.NotEqual(t, first, second, "each attempt carries its own jti and iat")
	for _, r := range h.requests {
		assert.Equal(t, h.requests[0].body, r.body, "retries resend the same body")
	}
}

func TestBootstrapCredentialRetriesA5xxThenSucceeds(t *testing.T) {
	h := newHarness(t, func(h *harness, w http.ResponseWriter, _ *http.Request, call int) {
		if call == 1 {
			respond(w, http.StatusInternalServerError, `{"error":"boom"}`)
			return
		}
		issue(h, w)
	})
	cred, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
	require.NoError(t, err)
	assert.Equal(t, testCredential, cred.Value)
	assert.EqualValues(t, 2, h.calls.Load())
	sleeps := h.recordedSleeps()
	require.Len(t, sleeps, 1)
	assert.GreaterOrEqual(t, sleeps[0], DefaultRetryBackoff/2, "jitter keeps at least half the backoff")
	assert.LessOrEqual(t, sleeps[0], DefaultRetryBackoff)
	assert.Equal(t, []string{RouteBootstrapCredentials + " 500", RouteBootstrapCredentials + " 200"}, h.recordedCodes())
}

func TestBootstrapCredentialGivesUpAfterMaxAttempts(t *testing.T) {
	for _, code := range []int{500, 502, 503, 504, 429} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			h := newHarness(t, status(code))
			_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
			require.Error(t, err)
			assert.EqualValues(t, DefaultMaxAttempts, h.calls.Load())
			assert.ErrorIs(t, err, ErrUnavailable)
			assert.NotErrorIs(t, err, ErrRejected)
			assert.NotErrorIs(t, err, ErrInvalidResponse)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, code, se.Code)
			assert.Equal(t, DefaultMaxAttempts, se.Attempts)
			assert.True(t, se.Retryable())
			assert.Equal(t, fmt.Sprintf("control API POST %s: HTTP %d after 3 attempts", RouteBootstrapCredentials, code), err.Error())

			sleeps := h.recordedSleeps()
			require.Len(t, sleeps, DefaultMaxAttempts-1, "no wait after the last attempt")
			assert.GreaterOrEqual(t, sleeps[1], DefaultRetryBackoff, "the backoff doubles")
			assert.LessOrEqual(t, sleeps[1], 2*DefaultRetryBackoff)
		})
	}
}

func TestBootstrapCredentialHonoursMaxAttempts(t *testing.T) {
	h := newHarness(t, status(http.StatusInternalServerError))
	_, err := h.client(t, func(o *Options) { o.MaxAttempts = 1 }).BootstrapCredential(context.Background(), testRequest)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.EqualValues(t, 1, h.calls.Load())
	assert.Empty(t, h.recordedSleeps())
}

func TestBootstrapCredentialBackoffIsCapped(t *testing.T) {
	c := newHarness(t, status(500)).client(t, func(o *Options) { o.RetryBackoff = time.Second })
	for attempt := 1; attempt <= 10; attempt++ {
		d := c.backoff(attempt)
		assert.LessOrEqual(t, d, maxBackoff, "attempt %d", attempt)
		assert.Greater(t, d, time.Duration(0), "attempt %d", attempt)
	}
}

func TestBootstrapCredentialTimesOutEachAttempt(t *testing.T) {
	h := newHarness(t, func(_ *harness, _ http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := h.client(t, func(o *Options) {
		o.AttemptTimeout = 50 * time.Millisecond
		o.MaxAttempts = 2
	})
	start := time.Now()
	_, err := c.BootstrapCredential(context.Background(), testRequest)
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var te *TransportError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Timeout)
	assert.Equal(t, 2, te.Attempts)
	assert.Contains(t, err.Error(), "timed out after 2 attempts")
	assert.EqualValues(t, 2, h.calls.Load())
	assert.Equal(t, []string{RouteBootstrapCredentials + " timeout", RouteBootstrapCredentials + " timeout"}, h.recordedCodes())
}

func TestBootstrapCredentialRetriesConnectionErrors(t *testing.T) {
	h := newHarness(t, status(200))
	c := h.client(t, func(o *Options) { o.HTTPClient = nil })
	h.server.Close() // nothing listens any more
	_, err := c.BootstrapCredential(context.Background(), testRequest)
	assert.ErrorIs(t, err, ErrUnavailable)
	var te *TransportError
	require.ErrorAs(t, err, &te)
	assert.False(t, te.Timeout)
	assert.Equal(t, DefaultMaxAttempts, te.Attempts)
	assert.Len(t, h.recordedSleeps(), DefaultMaxAttempts-1)
	assert.Equal(t, RouteBootstrapCredentials+" error", h.recordedCodes()[0])
}

func TestBootstrapCredentialDoesNotRetryA4xx(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 409, 422} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			h := newHarness(t, status(code))
			_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
			assert.EqualValues(t, 1, h.calls.Load())
			assert.Empty(t, h.recordedSleeps())
			assert.ErrorIs(t, err, ErrRejected)
			assert.NotErrorIs(t, err, ErrUnavailable)
			assert.NotErrorIs(t, err, ErrInvalidResponse)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, code, se.Code)
			assert.False(t, se.Retryable())
		})
	}
}

func TestBootstrapCredentialHonoursRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter func(now time.Time) string
		wantSleep  time.Duration
	}{{
		name:       "delay in seconds",
		retryAfter: func(time.Time) string { return "2" },
		wantSleep:  2 * time.Second,
	}, {
		name:       "HTTP date",
		retryAfter: func(now time.Time) string { return now.Add(3 * time.Second).Format(http.TimeFormat) },
		wantSleep:  3 * time.Second,
	}, {
		name:       "zero keeps the backoff",
		retryAfter: func(time.Time) string { return "0" },
	}, {
		name:       "garbage keeps the backoff",
		retryAfter: func(time.Time) string { return "soon" },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(h *harness, w http.ResponseWriter, _ *http.Request, call int) {
				if call == 1 {
					w.Header().Set("Retry-After", tt.retryAfter(h.clock.Now()))
					respond(w, http.StatusTooManyRequests, `{"error":"rate_limited"}`)
					return
				}
				issue(h, w)
			})
			_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
			require.NoError(t, err)
			assert.EqualValues(t, 2, h.calls.Load())
			sleeps := h.recordedSleeps()
			require.Len(t, sleeps, 1)
			if tt.wantSleep != 0 {
				assert.Equal(t, tt.wantSleep, sleeps[0])
			} else {
				assert.LessOrEqual(t, sleeps[0], DefaultRetryBackoff)
			}
		})
	}
}

func TestBootstrapCredentialStopsOnARetryAfterBeyondTheCap(t *testing.T) {
	h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Retry-After", "120")
		respond(w, http.StatusServiceUnavailable, "")
	})
	_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
	assert.EqualValues(t, 1, h.calls.Load(), "the worker is not held for two minutes")
	assert.Empty(t, h.recordedSleeps())
	assert.ErrorIs(t, err, ErrUnavailable)
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 120*time.Second, se.RetryAfter, "the caller can requeue after it")
	assert.Contains(t, err.Error(), "Retry-After 2m0s")
}

func TestBootstrapCredentialRefusesUnusableBodies(t *testing.T) {
	expires := testNow.Add(time.Hour).Format(time.RFC3339)
	tests := []struct{ name, body string }{
		{"not JSON", `credential=x`},
		{"empty body", ``},
		{"truncated object", `{"credential":"c","expiresAt":"` + expires},
		{"array", `[{"credential":"c","expiresAt":"` + expires + `"}]`},
		{"null", `null`},
		{"data after the object", `{"credential":"c","expiresAt":"` + expires + `"} {}`},
		{"missing credential", `{"expiresAt":"` + expires + `"}`},
		{"empty credential", `{"credential":"","expiresAt":"` + expires + `"}`},
		{"null credential", `{"credential":null,"expiresAt":"` + expires + `"}`},
		{"numeric credential", `{"credential":5,"expiresAt":"` + expires + `"}`},
		{"credential with a line break", `{"credential":"a\nb","expiresAt":"` + expires + `"}`},
		{"credential with surrounding space", `{"credential":" c","expiresAt":"` + expires + `"}`},
		{"missing expiresAt", `{"credential":"c"}`},
		{"unparseable expiresAt", `{"credential":"c","expiresAt":"tomorrow"}`},
		{"date-only expiresAt", `{"credential":"c","expiresAt":"2030-01-03"}`},
		{"numeric expiresAt", `{"credential":"c","expiresAt":1893639845}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) { respond(w, 200, tt.body) })
			cred, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
			assert.Zero(t, cred)
			assert.ErrorIs(t, err, ErrInvalidResponse)
			assert.NotErrorIs(t, err, ErrUnavailable)
			assert.NotErrorIs(t, err, ErrExpiresTooSoon)
			assert.EqualValues(t, 1, h.calls.Load(), "a broken response is not retried")
			assert.Equal(t, []string{RouteBootstrapCredentials + " invalid"}, h.recordedCodes())
		})
	}
}

func TestBootstrapCredentialAcceptsExtraMembersAndOffsets(t *testing.T) {
	h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) {
		respond(w, 200, `{"credential":"c","expiresAt":"2030-01-02T05:04:05.5+01:00","kind":"bootstrap"}`)
	})
	cred, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
	require.NoError(t, err)
	assert.Equal(t, testNow.Add(time.Hour+500*time.Millisecond), cred.ExpiresAt)
	assert.Equal(t, time.UTC, cred.ExpiresAt.Location())
}

func TestBootstrapCredentialRefusesAnExpiryTooSoon(t *testing.T) {
	const minLifetime = 15 * time.Minute
	tests := []struct {
		name     string
		lifetime time.Duration
		wantErr  bool
	}{
		{"already past", -time.Minute, true},
		{"expiring now", 0, true},
		{"within the refresh window", 10 * time.Minute, true},
		{"exactly the refresh window", minLifetime, true},
		{"a second beyond the refresh window", minLifetime + time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := testNow.Add(tt.lifetime)
			h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) {
				respond(w, 200, fmt.Sprintf(`{"credential":"c","expiresAt":%q}`, at.Format(time.RFC3339)))
			})
			cred, err := h.client(t, func(o *Options) { o.MinLifetime = minLifetime }).BootstrapCredential(context.Background(), testRequest)
			assert.EqualValues(t, 1, h.calls.Load())
			if !tt.wantErr {
				require.NoError(t, err)
				assert.Equal(t, at, cred.ExpiresAt)
				return
			}
			assert.ErrorIs(t, err, ErrExpiresTooSoon)
			assert.ErrorIs(t, err, ErrInvalidResponse)
			assert.NotErrorIs(t, err, ErrUnavailable)
			var re *ResponseError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, at, re.ExpiresAt)
			assert.Contains(t, err.Error(), at.Format(time.RFC3339))
		})
	}
}

func TestBootstrapCredentialBoundsTheBody(t *testing.T) {
	valid := fmt.Sprintf(`{"credential":"c","expiresAt":%q}`, testNow.Add(time.Hour).Format(time.RFC3339))
	tests := []struct {
		name    string
		body    string
		wantErr bool
	}{
		{"at the limit", valid + strings.Repeat(" ", MaxResponseBytes-len(valid)), false},
		{"a byte over the limit", valid + strings.Repeat(" ", MaxResponseBytes-len(valid)+1), true},
		{"far over the limit", `{"credential":"` + strings.Repeat("a", 4*MaxResponseBytes) + `"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) { respond(w, 200, tt.body) })
			_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
			if !tt.wantErr {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrInvalidResponse)
			assert.Contains(t, err.Error(), "body exceeds 65536 bytes")
			assert.EqualValues(t, 1, h.calls.Load())
		})
	}
}

func TestBootstrapCredentialDoesNotFollowRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		respond(w, 200, `{}`)
	}))
	defer target.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			h := newHarness(t, func(_ *harness, w http.ResponseWriter, r *http.Request, _ int) {
				http.Redirect(w, r, target.URL+RouteBootstrapCredentials, code)
			})
			client := h.server.Client() // follows redirects as it is
			c := h.client(t, func(o *Options) { o.HTTPClient = client })
			_, err := c.BootstrapCredential(context.Background(), testRequest)
			assert.ErrorIs(t, err, ErrInvalidResponse)
			assert.NotErrorIs(t, err, ErrUnavailable)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, code, se.Code)
			assert.EqualValues(t, 1, h.calls.Load())
			assert.Zero(t, elsewhere.Load(), "the bearer never reached the redirect target")
			assert.Nil(t, client.CheckRedirect, "the caller's client is not changed")
		})
	}
}

func TestBootstrapCredentialRefusesOtherSuccessStatuses(t *testing.T) {
	h := newHarness(t, status(http.StatusCreated))
	_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
	assert.ErrorIs(t, err, ErrInvalidResponse)
	assert.EqualValues(t, 1, h.calls.Load())
}

func TestBootstrapCredentialStopsWhenTheContextEnds(t *testing.T) {
	t.Run("during the wait before a retry", func(t *testing.T) {
		h := newHarness(t, status(http.StatusInternalServerError))
		c := h.client(t, func(o *Options) {
			o.Sleep = nil // the real timer
			o.RetryBackoff = time.Minute
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.BootstrapCredential(ctx, testRequest)
		assert.Less(t, time.Since(start), 5*time.Second)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, ErrUnavailable)
		var se *StatusError
		require.ErrorAs(t, err, &se, "the last answer is kept")
		assert.Equal(t, 500, se.Code)
		assert.EqualValues(t, 1, h.calls.Load())
	})
	t.Run("during an attempt", func(t *testing.T) {
		h := newHarness(t, func(_ *harness, _ http.ResponseWriter, r *http.Request, _ int) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		})
		c := h.client(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.BootstrapCredential(ctx, testRequest)
		assert.Less(t, time.Since(start), 3*time.Second)
		assert.ErrorIs(t, err, context.Canceled)
		var te *TransportError
		require.ErrorAs(t, err, &te)
		assert.False(t, te.Timeout, "the caller's end is not an attempt timeout")
		assert.EqualValues(t, 1, h.calls.Load())
		assert.Empty(t, h.recordedSleeps())
		assert.Equal(t, []string{RouteBootstrapCredentials + " canceled"}, h.recordedCodes())
	})
	t.Run("before the first attempt", func(t *testing.T) {
		h := newHarness(t, status(200))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := h.client(t, nil).BootstrapCredential(ctx, testRequest)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Zero(t, h.calls.Load())
	})
}

// A Control API that echoes what it received — in the body, in headers —
// must not get the bearer, the secret or the credential into an error.
func TestBootstrapCredentialErrorsCarryNoSecrets(t *testing.T) {
	echo := func(code int) func(*harness, http.ResponseWriter, *http.Request, int) {
		return func(_ *harness, w http.ResponseWriter, r *http.Request, _ int) {
			auth := r.Header.Get("Authorization")
			w.Header().Set("X-Echo", auth)
			w.Header().Set("Retry-After", auth)
			respond(w, code, fmt.Sprintf(`{"error":%q,"credential":%q,"secret":%q}`, auth, testCredential, testSecret))
		}
	}
	tests := []struct {
		name    string
		handler func(*harness, http.ResponseWriter, *http.Request, int)
	}{
		{"500 echoing the request", echo(500)},
		{"401 echoing the request", echo(401)},
		{"302 echoing the request", echo(302)},
		{"200 with the bearer as expiry", func(_ *harness, w http.ResponseWriter, r *http.Request, _ int) {
			respond(w, 200, fmt.Sprintf(`{"credential":%q,"expiresAt":%q}`, testCredential, r.Header.Get("Authorization")))
		}},
		{"200 with the credential in a broken body", func(_ *harness, w http.ResponseWriter, r *http.Request, _ int) {
			respond(w, 200, fmt.Sprintf(`{"credential":%q,"expiresAt":5,"token":%q`, testCredential, r.Header.Get("Authorization")))
		}},
		{"200 expiring too soon", func(h *harness, w http.ResponseWriter, _ *http.Request, _ int) {
			respond(w, 200, fmt.Sprintf(`{"credential":%q,"expiresAt":%q}`, testCredential, h.clock.Now().Format(time.RFC3339)))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.handler)
			_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
			require.Error(t, err)
			var tokens []string
			for _, r := range h.requests {
				_, token, _ := strings.Cut(r.header.Get("Authorization"), "Bearer ")
				require.NotEmpty(t, token)
				tokens = append(tokens, token)
			}
			for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
				assert.NotContains(t, text, testCredential)
				assert.NotContains(t, text, string(testSecret))
				for _, token := range tokens {
					assert.NotContains(t, text, token)
					// The signature alone is the secret part.
					assert.NotContains(t, text, token[strings.LastIndex(token, ".")+1:])
				}
			}
		})
	}
}

func TestCredentialFormattingRedactsTheValue(t *testing.T) {
	cred := Credential{Value: testCredential, ExpiresAt: testNow}
	data, err := json.Marshal(cred)
	require.NoError(t, err)
	for _, text := range []string{
		fmt.Sprint(cred), fmt.Sprintf("%v", &cred), fmt.Sprintf("%+v", cred), fmt.Sprintf("%#v", cred),
		fmt.Sprintf("got %s", cred), string(data),
	} {
		assert.NotContains(t, text, testCredential)
		assert.Contains(t, text, "2030-01-02T03:04:05Z")
	}
}

func TestBootstrapCredentialRefusesAnIncompleteRequest(t *testing.T) {
	h := newHarness(t, status(200))
	c := h.client(t, nil)
	for _, req := range []BootstrapRequest{
		{HostRef: "host-a", HostUID: "uid"},
		{Namespace: "mcp-host", HostUID: "uid"},
		{Namespace: "mcp-host", HostRef: "host-a"},
	} {
		_, err := c.BootstrapCredential(context.Background(), req)
		assert.Error(t, err)
		assert.NotErrorIs(t, err, ErrUnavailable)
	}
	assert.Zero(t, h.calls.Load())
}

func TestBootstrapCredentialIsSafeForConcurrentUse(t *testing.T) {
	h := newHarness(t, func(h *harness, w http.ResponseWriter, _ *http.Request, call int) {
		if call%3 == 0 {
			respond(w, 503, "")
			return
		}
		issue(h, w)
	})
	c := h.client(t, func(o *Options) { o.MaxAttempts = 5 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := c.BootstrapCredential(context.Background(), testRequest)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
}

func TestNewValidatesOptions(t *testing.T) {
	valid := Options{BaseURL: "http://control-api.control-plane.svc.cluster.local:8090", HMACSecret: testSecret}
	tests := []struct {
		name string
		edit func(*Options)
	}{
		{"empty secret", func(o *Options) { o.HMACSecret = nil }},
		{"empty base URL", func(o *Options) { o.BaseURL = "" }},
		{"relative base URL", func(o *Options) { o.BaseURL = "control-api:8090" }},
		{"other scheme", func(o *Options) { o.BaseURL = "ftp://control-api" }},
		{"user info", func(o *Options) { o.BaseURL = "http://user:hunter2@control-api" }},
		{"query", func(o *Options) { o.BaseURL = "http://control-api/?a=b" }},
		{"empty query", func(o *Options) { o.BaseURL = "http://control-api?" }},
		{"fragment", func(o *Options) { o.BaseURL = "http://control-api#x" }},
		{"negative attempt timeout", func(o *Options) { o.AttemptTimeout = -1 }},
		{"negative attempts", func(o *Options) { o.MaxAttempts = -1 }},
		{"negative backoff", func(o *Options) { o.RetryBackoff = -1 }},
		{"negative Retry-After cap", func(o *Options) { o.MaxRetryAfter = -1 }},
		{"negative minimum lifetime", func(o *Options) { o.MinLifetime = -1 }},
		{"negative reported Retry-After cap", func(o *Options) { o.RetryAfterCap = -1 }},
		{"negative maximum lifetime", func(o *Options) { o.MaxLifetime = -1 }},
		{"a maximum lifetime not above the minimum", func(o *Options) { o.MinLifetime, o.MaxLifetime = time.Hour, time.Hour }},
		{"a minimum lifetime beyond the default maximum", func(o *Options) { o.MinLifetime = 31 * 24 * time.Hour }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.edit(&o)
			_, err := New(o)
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "hunter2")
		})
	}

	c, err := New(valid)
	require.NoError(t, err)
	assert.Equal(t, valid.BaseURL+RouteBootstrapCredentials, c.endpoint)
	assert.Equal(t, DefaultAttemptTimeout, c.attemptTimeout)
	assert.Equal(t, DefaultMaxAttempts, c.maxAttempts)
	assert.Equal(t, DefaultRetryAfterCap, c.retryAfterCap)
	assert.Equal(t, DefaultMaxLifetime, c.maxLifetime)
	transport, ok := c.http.Transport.(*http.Transport)
	require.True(t, ok)
	assert.Nil(t, transport.Proxy, "the bearer never goes through an environment proxy")

	secret := []byte("mutable")
	c, err = New(Options{BaseURL: valid.BaseURL, HMACSecret: secret})
	require.NoError(t, err)
	secret[0] = 'X'
	assert.Equal(t, []byte("mutable"), c.secret, "New keeps its own copy")
}

func TestErrorClassesAreExclusive(t *testing.T) {
	classes := []error{ErrUnavailable, ErrRejected, ErrInvalidResponse}
	errs := []error{
		&StatusError{Code: 100}, &StatusError{Code: 204}, &StatusError{Code: 304},
		&StatusError{Code: 400}, &StatusError{Code: 429}, &StatusError{Code: 499},
		&StatusError{Code: 500}, &StatusError{Code: 599},
		&TransportError{Err: errors.New("x")}, &ResponseError{}, &ResponseError{ExpiresAt: testNow},
	}
	for _, err := range errs {
		matched := 0
		for _, class := range classes {
			if errors.Is(err, class) {
				matched++
			}
		}
		assert.Equal(t, 1, matched, "%#v", err)
	}
}

func mustSegment(t *testing.T, token string, i int) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[i])
	require.NoError(t, err)
	return b
}

func TestBootstrapCredentialTimesOutReadingTheBody(t *testing.T) {
	h := newHarness(t, func(_ *harness, w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"credential":`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c := h.client(t, func(o *Options) {
		o.AttemptTimeout = 50 * time.Millisecond
		o.MaxAttempts = 1
	})
	_, err := c.BootstrapCredential(context.Background(), testRequest)
	assert.ErrorIs(t, err, ErrUnavailable, "a body cut short is the transport's failure, not a broken answer")
	var te *TransportError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Timeout)
	assert.Equal(t, []string{RouteBootstrapCredentials + " timeout"}, h.recordedCodes())
}

// A Retry-After is reported at most as RetryAfterCap (the refresh window):
// 4294967295 seconds, or an HTTP date centuries away, would otherwise put a
// Host off for longer than its credential lives.
func TestBootstrapCredentialCapsAReportedRetryAfter(t *testing.T) {
	const window = 15 * time.Minute
	for name, value := range map[string]func(now time.Time) string{
		"the largest delay-seconds": func(time.Time) string { return "4294967295" },
		"an HTTP date in 9999":      func(time.Time) string { return "Fri, 31 Dec 9999 23:59:59 GMT" },
		"an hour":                   func(time.Time) string { return "3600" },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(h *harness, w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Retry-After", value(h.clock.Now()))
				respond(w, http.StatusTooManyRequests, "")
			})
			_, err := h.client(t, func(o *Options) { o.RetryAfterCap = window }).BootstrapCredential(context.Background(), testRequest)
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, window, se.RetryAfter)
			assert.EqualValues(t, 1, h.calls.Load())
		})
	}
	t.Run("without RetryAfterCap, the default", func(t *testing.T) {
		h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "4294967295")
			respond(w, http.StatusServiceUnavailable, "")
		})
		_, err := h.client(t, nil).BootstrapCredential(context.Background(), testRequest)
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, DefaultRetryAfterCap, se.RetryAfter)
	})
	t.Run("a shorter one is reported as it is", func(t *testing.T) {
		h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) {
			w.Header().Set("Retry-After", "120")
			respond(w, http.StatusServiceUnavailable, "")
		})
		_, err := h.client(t, func(o *Options) { o.RetryAfterCap = window }).BootstrapCredential(context.Background(), testRequest)
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 2*time.Minute, se.RetryAfter)
	})
}

// A credential living longer than MaxLifetime
// (HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC) is an invalid answer, the year
// 9999 included.
func TestBootstrapCredentialRefusesALifetimeBeyondTheMaximum(t *testing.T) {
	const maxLifetime = 30 * 24 * time.Hour
	tests := []struct {
		name      string
		expiresAt string
		wantErr   bool
	}{
		{"the year 9999", "9999-12-31T23:59:59Z", true},
		{"a second beyond the maximum", testNow.Add(maxLifetime + time.Second).Format(time.RFC3339), true},
		{"exactly the maximum", testNow.Add(maxLifetime).Format(time.RFC3339), false},
		{"a day", testNow.Add(24 * time.Hour).Format(time.RFC3339), false},
	}
	for _, tt := range tests {
		for _, configured := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, configured %v", tt.name, configured), func(t *testing.T) {
				h := newHarness(t, func(_ *harness, w http.ResponseWriter, _ *http.Request, _ int) {
					respond(w, 200, fmt.Sprintf(`{"credential":"c","expiresAt":%q}`, tt.expiresAt))
				})
				edit := func(o *Options) {
					if configured {
						o.MaxLifetime = maxLifetime
					}
				}
				cred, err := h.client(t, edit).BootstrapCredential(context.Background(), testRequest)
				assert.EqualValues(t, 1, h.calls.Load(), "not retried")
				if !tt.wantErr {
					require.NoError(t, err)
					return
				}
				assert.Zero(t, cred)
				assert.ErrorIs(t, err, ErrInvalidResponse)
				assert.NotErrorIs(t, err, ErrExpiresTooSoon)
				assert.NotErrorIs(t, err, ErrUnavailable)
				assert.Contains(t, err.Error(), "beyond the maximum lifetime of 720h0m0s")
				assert.Equal(t, []string{RouteBootstrapCredentials + " invalid"}, h.recordedCodes())
			})
		}
	}
}
