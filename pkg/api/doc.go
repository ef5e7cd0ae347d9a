// Package api is the hcc-api HTTP surface: the anonymous v1 inventory, the
// desktop status route, and the host-scoped v2 inventory and credential
// routes that mcp-host calls with an RS256 runtime token (contract §5).
//
// The package only reads. Every handler answers from informer caches
// through the small reader interfaces of sources.go, so a replica never
// writes to the cluster and every replica with synced caches answers alike.
//
// A v2 request passes these gates in order, and each failure is terminal:
//
//  1. token verification (token.go, tokencache.go): a compact RS256 JWS
//     from the configured issuer with the exact claims of contract §5;
//  2. authority (authority.go): the live Host named by the token still has
//     the token's UID, and its live Context exists;
//  3. rate limiting (ratelimit.go) per verified Host UID and action;
//  4. the grant (authority.go): the Context names the server, which exists
//     and is enabled. Only then is a Secret read (credential.go), and the
//     authority is checked again before the value leaves the process.
//
// Failures of 1 and 2 are one 401 body and failures of 4 one 404 body,
// whatever the cause; the cause goes to logs and to a metric label.
package api
