package controlapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The error classes of the package doc. Every error BootstrapCredential
// returns for a request it sent matches exactly one of ErrUnavailable,
// ErrRejected and ErrInvalidResponse; ErrExpiresTooSoon also matches
// ErrInvalidResponse.
var (
	// ErrUnavailable: no usable answer within the attempts allowed —
	// transport errors, per-attempt timeouts, 429 and 5xx.
	ErrUnavailable = errors.New("control API unavailable")
	// ErrRejected: a 4xx other than 429, such as 401 for a token signed with
	// another secret. Never retried.
	ErrRejected = errors.New("control API rejected the request")
	// ErrInvalidResponse: a response HCC cannot use — a redirect, a success
	// status other than 200, or a 200 whose body is oversized, not the JSON
	// object of docs/control-api.md, or lacks a credential or expiresAt.
	// Never retried: the same server answers the same way.
	ErrInvalidResponse = errors.New("control API response invalid")
	// ErrExpiresTooSoon: a 200 whose expiresAt is already past or within
	// Options.MinLifetime. Storing it would schedule its refresh at once.
	ErrExpiresTooSoon = errors.New("control API credential expires too soon")
)

// StatusError is an answer with a status other than 200.
type StatusError struct {
	Route    string
	Code     int
	Attempts int // requests sent, this one included
	// RetryAfter is the server's Retry-After, zero when absent or invalid.
	// When it exceeds Options.MaxRetryAfter the client stops retrying at
	// once, and a caller may requeue after it instead.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	text := fmt.Sprintf("control API POST %s: HTTP %d after %s", e.Route, e.Code, attempts(e.Attempts))
	if e.RetryAfter > 0 {
		text += fmt.Sprintf(" (Retry-After %s)", e.RetryAfter)
	}
	return text
}

// Retryable reports whether the status is one the client retries: 429 or 5xx.
func (e *StatusError) Retryable() bool {
	return e.Code == http.StatusTooManyRequests || e.Code >= 500
}

// Is places the status in its class: 429 and 5xx are ErrUnavailable, other
// 4xx ErrRejected, and everything else (1xx, other 2xx, 3xx) ErrInvalidResponse.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return e.Retryable()
	case ErrRejected:
		return e.Code >= 400 && e.Code < 500 && !e.Retryable()
	case ErrInvalidResponse:
		return e.Code < 400
	}
	return false
}

// TransportError is an attempt that got no complete response: the
// connection failed, the attempt timed out, or the caller's context ended.
type TransportError struct {
	Route    string
	Attempts int
	// Timeout is set when the attempt ran out of Options.AttemptTimeout.
	Timeout bool
	// Err is the transport's error (a *url.Error naming the URL, which
	// carries no credentials: New refuses a base URL with user info).
	Err error
}

func (e *TransportError) Error() string {
	what := "request failed"
	if e.Timeout {
		what = "timed out"
	}
	return fmt.Sprintf("control API POST %s: %s after %s: %v", e.Route, what, attempts(e.Attempts), e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Is reports every TransportError as ErrUnavailable.
func (e *TransportError) Is(target error) bool { return target == ErrUnavailable }

// ResponseError is a 200 whose body HCC cannot use. Reason is fixed text
// chosen here; it never quotes the body, which may hold the credential.
type ResponseError struct {
	Route    string
	Attempts int
	Reason   string
	// ExpiresAt is set, and the error matches ErrExpiresTooSoon, when the
	// body was well-formed but the credential expires too soon.
	ExpiresAt time.Time
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("control API POST %s: invalid response after %s: %s", e.Route, attempts(e.Attempts), e.Reason)
}

// Is reports ErrInvalidResponse, and ErrExpiresTooSoon when ExpiresAt is set.
func (e *ResponseError) Is(target error) bool {
	return target == ErrInvalidResponse || (target == ErrExpiresTooSoon && !e.ExpiresAt.IsZero())
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// setAttempts records on err how many requests the call sent.
func setAttempts(err error, n int) {
	var (
		status    *StatusError
		transport *TransportError
		response  *ResponseError
	)
	switch {
	case errors.As(err, &status):
		status.Attempts = n
	case errors.As(err, &transport):
		transport.Attempts = n
	case errors.As(err, &response):
		response.Attempts = n
	}
}
