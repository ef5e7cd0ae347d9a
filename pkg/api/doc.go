// Package api is the hcc-api HTTP surface: the anonymous v1 inventory, the
// desktop status route, and the host-scoped v2 inventory and credential
// routes that mcp-host calls with an RS256 runtime token. docs/http-api.md
// is the contract these handlers implement.
//
// The package only reads. Every handler answers from informer caches
// through the small reader interfaces of sources.go, so a replica never
// writes to the cluster and every replica with synced caches answers alike.
//
// A v2 request passes these gates in order, and each failure is terminal:
//
//  1. token verification (token.go, keys.go, tokencache.go): a canonical
//     compact RS256 JWS, signed by a configured key, from the configured
//     issuer, with exactly the claims docs/http-api.md lists;
//  2. authority (authority.go): the live Host named by the token still has
//     the token's UID, and its live Context exists;
//  3. rate limiting (ratelimit.go) per verified Host UID and action;
//  4. the grant (authority.go): the Context names the server, which exists
//     and is enabled. Only then is a Secret read (credential.go); the
//     authority, the grant, the server's auth reference and the Secret's
//     version are checked again before the value leaves the process.
//
// Failures of 1 and 2 are one 401 body and failures of 4 one 404 body,
// whatever the cause; the cause goes to logs and to a metric label.
package api
