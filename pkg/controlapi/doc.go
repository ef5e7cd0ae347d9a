// Package controlapi is HCC's client of the Control API (docs/control-api.md):
// it obtains each Host's mcp-host bootstrap credential from
// POST {CONTROL_API_BASE_URL}/internal/v1/mcp-host/bootstrap-credentials,
// authenticated by a short-lived HS256 InternalControl JWT.
//
// The client never logs. Its errors carry the route, the status code and the
// attempt count, never a response body, the signed token, the HMAC secret or
// the credential, so a caller may log them as they are. They sort into three
// classes the controller acts on differently, tested with errors.Is:
// ErrUnavailable (transient: retried here, then worth a later requeue),
// ErrRejected (the Control API refused the request: a configuration problem
// retrying will not fix) and ErrInvalidResponse (the Control API answered 200
// with something unusable; ErrExpiresTooSoon is the case of a well-formed
// credential whose expiry leaves no room before its refresh window).
//
// SignInternalToken and VerifyInternalToken are the two halves of the bearer
// token, exported so that the development Control API and tests check exactly
// what the client sends.
package controlapi
