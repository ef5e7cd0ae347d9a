// Package devcontrolapi is the development Control API that `make run` and
// the end-to-end tests run in place of the platform's (docs/control-api.md).
// It implements the two routes HCC and mcp-host use:
//
//   - POST /internal/v1/mcp-host/bootstrap-credentials, called by
//     hcc-controller with an HS256 InternalControl token, issues a Host's
//     long-lived bootstrap credential;
//   - POST /api/v1/mcp-host/token, called by mcp-host (through
//     MCP_HOST_GATEWAY_URL), exchanges that credential for a short-lived
//     RS256 access token with the claims hcc-api checks (docs/http-api.md).
//
// Credentials live in memory only; a new credential for a Host replaces
// its previous one, which stops exchanging. It is a development server:
// one process, no persistence, no Host lookups of its own.
package devcontrolapi

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/clerum/hcc/pkg/api"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/strictjson"
)

// Routes served by Handler.
const (
	RouteBootstrapCredentials = controlapi.RouteBootstrapCredentials
	RouteTokenExchange        = "/api/v1/mcp-host/token"
)

// Defaults of Options.
const (
	DefaultIssuer             = "control-api"
	DefaultAudience           = "host-context-controller"
	DefaultMigrationAudience  = "workflow-controller"
	DefaultCredentialLifetime = 24 * time.Hour
	DefaultAccessTokenTTL     = 5 * time.Minute
	// CredentialCapability is the one capability an access token carries.
	CredentialCapability = "mcp:credential:read"
	maxBodyBytes         = 16 << 10
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// HMACSecret is INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET, shared with
	// hcc-controller. Required.
	HMACSecret []byte
	// SigningKey signs access tokens; nil generates a 2048-bit key.
	SigningKey *rsa.PrivateKey
	// Issuer and Audience are the iss and the first aud of access tokens
	// (HCC_MCP_HOST_JWT_ISSUER and HCC_MCP_HOST_JWT_AUDIENCE of hcc-api);
	// MigrationAudience, when set, is a second aud member.
	Issuer, Audience, MigrationAudience string
	// CredentialLifetime is how long a bootstrap credential stays valid. It
	// must exceed hcc-controller's refresh window
	// (HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC, 900 s by default),
	// or the controller refuses it.
	CredentialLifetime time.Duration
	// AccessTokenTTL is exp - iat of access tokens; at most hcc-api's
	// HCC_MCP_HOST_JWT_MAX_TTL_SECONDS (600 s by default). The shipped
	// hcc-api Deployment sets that variable to DefaultAccessTokenTTL, and a
	// test in test/deploy keeps the two equal.
	AccessTokenTTL time.Duration
	// Clock stamps credentials and tokens; nil means the real clock.
	Clock clock.PassiveClock
	// Logf, when set, gets one line per request decision. It never
	// receives a credential or a token.
	Logf func(format string, args ...any)
}

// Server is the development Control API. It is safe for concurrent use.
type Server struct {
	opts Options
	key  *rsa.PrivateKey
	kid  string

	mu sync.Mutex
	// grants maps the SHA-256 of a credential to what it was issued for,
	// so the map holds no usable credential.
	grants map[[sha256.Size]byte]Grant
	// current maps a Host UID to the digest of its newest credential.
	current map[string][sha256.Size]byte
	// issued is every bootstrap credential issued, replaced ones
	// included, in order.
	issued []Issuance
}

// Issuance is one bootstrap credential issued: for which Host, and when
// its answer was written.
type Issuance struct {
	Namespace, HostRef, HostUID string
	At                          time.Time
}

// Grant is what a bootstrap credential was issued for.
type Grant struct {
	Namespace string
	HostRef   string
	HostUID   string
	ExpiresAt time.Time
}

// New returns a Server, generating a signing key if opts has none.
func New(opts Options) (*Server, error) {
	if len(opts.HMACSecret) == 0 {
		return nil, errors.New("devcontrolapi: HMACSecret is required")
	}
	opts.HMACSecret = bytes.Clone(opts.HMACSecret)
	if opts.Issuer == "" {
		opts.Issuer = DefaultIssuer
	}
	if opts.Audience == "" {
		opts.Audience = DefaultAudience
	}
	if opts.CredentialLifetime == 0 {
		opts.CredentialLifetime = DefaultCredentialLifetime
	}
	if opts.AccessTokenTTL == 0 {
		opts.AccessTokenTTL = DefaultAccessTokenTTL
	}
	if opts.AccessTokenTTL < time.Second || opts.AccessTokenTTL%time.Second != 0 {
		return nil, fmt.Errorf("devcontrolapi: AccessTokenTTL %s is not a whole number of seconds", opts.AccessTokenTTL)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	key := opts.SigningKey
	if key == nil {
		var err error
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			return nil, fmt.Errorf("devcontrolapi: generating the signing key: %w", err)
		}
	}
	return &Server{
		opts:    opts,
		key:     key,
		kid:     api.KeyID(&key.PublicKey),
		grants:  map[[sha256.Size]byte]Grant{},
		current: map[string][sha256.Size]byte{},
	}, nil
}

// PublicKeyPEM is the PKIX PEM of the signing key's public half: the value
// of hcc-api's HCC_MCP_HOST_JWT_PUBLIC_KEY.
func (s *Server) PublicKeyPEM() string {
	der, err := x509.MarshalPKIXPublicKey(&s.key.PublicKey)
	if err != nil {
		panic(err) // an *rsa.PublicKey always marshals
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// HMACSecret is a copy of the secret the bootstrap route verifies
// bearers with: hcc-controller's INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET.
func (s *Server) HMACSecret() []byte { return bytes.Clone(s.opts.HMACSecret) }

// Handler serves the two routes; anything else is 404.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+RouteBootstrapCredentials, s.bootstrapCredentials)
	mux.HandleFunc("POST "+RouteTokenExchange, s.tokenExchange)
	return mux
}

type bootstrapRequest struct {
	Namespace string `json:"namespace"`
	HostRef   string `json:"hostRef"`
	HostUID   string `json:"hostUid"`
}

func (s *Server) bootstrapCredentials(w http.ResponseWriter, r *http.Request) {
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		s.refuse(w, http.StatusUnauthorized, "bootstrap: no bearer")
		return
	}
	if _, err := controlapi.VerifyInternalToken(bearer, s.opts.HMACSecret, s.opts.Clock.Now()); err != nil {
		s.refuse(w, http.StatusUnauthorized, "bootstrap: "+err.Error())
		return
	}
	var req bootstrapRequest
	if err := decodeStrict(r.Body, &req, "namespace", "hostRef", "hostUid"); err != nil || req.Namespace == "" || req.HostRef == "" || req.HostUID == "" {
		s.refuse(w, http.StatusBadRequest, "bootstrap: body is not {namespace, hostRef, hostUid}")
		return
	}
	credential, err := randomCredential()
	if err != nil {
		s.refuse(w, http.StatusInternalServerError, "bootstrap: "+err.Error())
		return
	}
	expiresAt := s.opts.Clock.Now().Add(s.opts.CredentialLifetime).UTC().Truncate(time.Second)
	digest := sha256.Sum256([]byte(credential))
	s.mu.Lock()
	if old, ok := s.current[req.HostUID]; ok {
		delete(s.grants, old)
	}
	s.grants[digest] = Grant{Namespace: req.Namespace, HostRef: req.HostRef, HostUID: req.HostUID, ExpiresAt: expiresAt}
	s.current[req.HostUID] = digest
	s.issued = append(s.issued, Issuance{Namespace: req.Namespace, HostRef: req.HostRef, HostUID: req.HostUID, At: time.Now()})
	s.mu.Unlock()
	s.opts.Logf("issued a bootstrap credential for Host %s/%s (uid %s), expires %s", req.Namespace, req.HostRef, req.HostUID, expiresAt.Format(time.RFC3339))
	writeJSON(w, http.StatusOK, map[string]string{"credential": credential, "expiresAt": expiresAt.Format(time.RFC3339)})
}

type exchangeRequest struct {
	Credential string `json:"credential"`
}

func (s *Server) tokenExchange(w http.ResponseWriter, r *http.Request) {
	var req exchangeRequest
	if err := decodeStrict(r.Body, &req, "credential"); err != nil || req.Credential == "" {
		s.refuse(w, http.StatusBadRequest, "exchange: body is not {credential}")
		return
	}
	token, expiresAt, err := s.Exchange(req.Credential)
	if err != nil {
		s.refuse(w, http.StatusUnauthorized, "exchange: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"accessToken": token, "expiresAt": expiresAt.Format(time.RFC3339)})
}

// ErrUnknownCredential is Exchange's answer to a credential that was never
// issued, was replaced, or has expired.
var ErrUnknownCredential = errors.New("unknown, replaced or expired credential")

// Exchange returns an RS256 access token for the Host a live credential was
// issued to, and when it expires.
func (s *Server) Exchange(credential string) (string, time.Time, error) {
	digest := sha256.Sum256([]byte(credential))
	now := s.opts.Clock.Now()
	s.mu.Lock()
	grant, ok := s.grants[digest]
	if ok && !now.Before(grant.ExpiresAt) {
		delete(s.grants, digest)
		ok = false
	}
	s.mu.Unlock()
	// The lookup compares digests, so its timing says nothing about the
	// credential's bytes.
	if !ok {
		return "", time.Time{}, ErrUnknownCredential
	}
	token, expiresAt, err := s.sign(grant, now)
	if err == nil {
		s.opts.Logf("exchanged a credential of Host %s/%s for an access token, expires %s", grant.Namespace, grant.HostRef, expiresAt.Format(time.RFC3339))
	}
	return token, expiresAt, err
}

// Issued is how many bootstrap credentials the server has issued, those
// replaced since included: a test compares it with the number of Hosts to
// catch a credential issued twice.
func (s *Server) Issued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.issued)
}

// Issuances is every bootstrap credential issued, in order, replaced ones
// included.
func (s *Server) Issuances() []Issuance {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// Grants returns what the live credentials were issued for, for tests.
func (s *Server) Grants() []Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Grant, 0, len(s.grants))
	for _, g := range s.grants {
		out = append(out, g)
	}
	return out
}

func (s *Server) sign(g Grant, now time.Time) (string, time.Time, error) {
	iat := now.Truncate(time.Second)
	exp := iat.Add(s.opts.AccessTokenTTL)
	aud := []string{s.opts.Audience}
	if s.opts.MigrationAudience != "" {
		aud = append(aud, s.opts.MigrationAudience)
	}
	jti, err := randomCredential()
	if err != nil {
		return "", time.Time{}, err
	}
	header, err := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": s.kid})
	if err != nil {
		return "", time.Time{}, err
	}
	claims, err := json.Marshal(map[string]any{
		"iss":          s.opts.Issuer,
		"aud":          aud,
		"iat":          iat.Unix(),
		"exp":          exp.Unix(),
		"jti":          jti,
		"hostRefs":     []string{g.HostRef},
		"host_uid":     g.HostUID,
		"capabilities": []string{CredentialCapability},
	})
	if err != nil {
		return "", time.Time{}, err
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", time.Time{}, err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), exp, nil
}

func (s *Server) refuse(w http.ResponseWriter, status int, why string) {
	s.opts.Logf("refused (%d): %s", status, why)
	writeJSON(w, status, map[string]string{"error": strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))})
}

// decodeStrict reads one JSON object whose members are exactly the JSON
// names of v's fields — matched case-sensitively, each once — with
// nothing after it. (encoding/json alone matches names case-insensitively
// and lets a duplicate's last value win.)
func decodeStrict(body io.Reader, v any, members ...string) error {
	raw, err := io.ReadAll(io.LimitReader(body, maxBodyBytes+1))
	if err != nil {
		return err
	}
	if len(raw) > maxBodyBytes {
		return errors.New("body too large")
	}
	got, err := strictjson.Object(raw)
	if err != nil {
		return err
	}
	for name := range got {
		if !slices.Contains(members, name) {
			return fmt.Errorf("unexpected member %q", name)
		}
	}
	return json.Unmarshal(raw, v)
}

func randomCredential() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
