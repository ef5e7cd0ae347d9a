package imagepolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

const (
	dockerHub       = "docker.io"
	officialImages  = "library"
	maxNameLength   = 255 // registry and path together, the limit the OCI distribution spec notes clients impose
	maxTagLength    = 128
	sha256HexLength = 64
)

// Reason is the stable, machine-readable outcome of a judgement, fit for a
// condition reason.
type Reason string

const (
	// ReasonPrefixMatched: the image is under an allowed prefix.
	ReasonPrefixMatched Reason = "PrefixMatched"
	// ReasonNoPrefixMatched: the image is well formed and under no allowed prefix.
	ReasonNoPrefixMatched Reason = "NoPrefixMatched"
	// ReasonInvalidReference: the image is not a reference this package will
	// normalize, so it is refused whatever the prefixes say.
	ReasonInvalidReference Reason = "InvalidReference"
)

// Verdict is the judgement of one image.
type Verdict struct {
	Allowed bool
	// Reference is the normalized image reference with its tag and digest,
	// e.g. docker.io/library/mongodb:7@sha256:…; empty when the image is
	// invalid.
	Reference string
	// Repository is Reference without tag and digest: what the prefixes were
	// tested against.
	Repository string
	// Prefix is the normalized allowed prefix that matched, with a trailing
	// slash (e.g. docker.io/mongodb/); empty unless Allowed.
	Prefix string
	Reason Reason
	// Detail says what is wrong with an invalid image, from a fixed set of
	// phrases that never quote the input; empty otherwise.
	Detail string
}

// Message is a one-line explanation for a condition message or a log. It
// names the normalized reference, never the raw input.
func (v Verdict) Message() string {
	switch v.Reason {
	case ReasonPrefixMatched:
		return fmt.Sprintf("image %s is under allowed prefix %s", v.Reference, v.Prefix)
	case ReasonNoPrefixMatched:
		return fmt.Sprintf("image %s is under no allowed prefix", v.Reference)
	default:
		return "image reference " + v.Detail
	}
}

// Policy is a parsed allowlist. The zero value and a nil *Policy allow
// nothing. A Policy is immutable and safe for concurrent use.
type Policy struct {
	// prefixes are normalized repositories without a trailing slash, each a
	// registry alone ("mcr.microsoft.com") or a registry and path
	// ("docker.io/mongodb"), deduplicated, in configuration order.
	prefixes []string
}

// Parse normalizes the configured prefixes (already split and trimmed by
// pkg/config). A prefix that cannot be normalized is an error, so the
// caller fails closed at startup; duplicates after normalization (the
// default list holds both "clerum/" and "docker.io/clerum/") are merged. An
// empty list parses to a Policy that allows nothing.
func Parse(prefixes []string) (*Policy, error) {
	p := &Policy{}
	seen := make(map[string]bool, len(prefixes))
	for i, raw := range prefixes {
		norm, err := normalizePrefix(raw)
		if err != nil {
			return nil, fmt.Errorf("allowed image prefix %d (%s) %w", i+1, quoteConfigured(raw), err)
		}
		if !seen[norm] {
			seen[norm] = true
			p.prefixes = append(p.prefixes, norm)
		}
	}
	return p, nil
}

// quoteConfigured quotes a configured prefix for an error, unless it holds
// an "@", which may introduce userinfo (credentials) that must not reach a
// log.
func quoteConfigured(raw string) string {
	if strings.Contains(raw, "@") {
		return "value withheld: it contains @"
	}
	return strconv.Quote(raw)
}

// Prefixes returns the normalized prefixes, each with a trailing slash, in
// configuration order: what the startup log should show.
func (p *Policy) Prefixes() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.prefixes))
	for i, prefix := range p.prefixes {
		out[i] = prefix + "/"
	}
	return out
}

// Judge normalizes image and tests its repository against the prefixes.
// The first matching prefix in configuration order is reported.
func (p *Policy) Judge(image string) Verdict {
	ref, err := parseReference(image)
	if err != nil {
		return Verdict{Reason: ReasonInvalidReference, Detail: err.Error()}
	}
	v := Verdict{Reference: ref.String(), Repository: ref.repository(), Reason: ReasonNoPrefixMatched}
	if p == nil {
		return v
	}
	for _, prefix := range p.prefixes {
		if underPrefix(v.Repository, prefix) {
			v.Allowed, v.Prefix, v.Reason = true, prefix+"/", ReasonPrefixMatched
			return v
		}
	}
	return v
}

// underPrefix reports whether repository is prefix itself or below it. The
// "/" is what keeps ghcr.io/evenfire-ai from matching ghcr.io/evenfire-aix.
func underPrefix(repository, prefix string) bool {
	return repository == prefix || strings.HasPrefix(repository, prefix+"/")
}

// Normalize returns the normalized form of image, with its tag and digest,
// as Judge reports it in Verdict.Reference. It is idempotent.
func Normalize(image string) (string, error) {
	ref, err := parseReference(image)
	if err != nil {
		return "", err
	}
	return ref.String(), nil
}

// The problems a reference or prefix can have. Their texts are what
// Verdict.Detail and Parse's error carry, so they are stable and quote
// nothing of the input.
var (
	errEmpty          = errors.New("is empty")
	errCharacters     = errors.New("contains whitespace, control or non-ASCII characters")
	errScheme         = errors.New("has a URL scheme; name the image without one")
	errTooManyAt      = errors.New("has more than one @")
	errDigest         = errors.New("has an @ that does not introduce a sha256 digest of 64 lower-case hex digits")
	errTag            = errors.New("has a tag that is empty, too long or has characters other than letters, digits, _ . and -")
	errNameTooLong    = errors.New("has a name longer than 255 characters")
	errNoPath         = errors.New("has a registry but no repository path")
	errHost           = errors.New("has a registry host that is empty or not a DNS name or bracketed IPv6 address")
	errPort           = errors.New("has a registry port that is empty or not a number from 1 to 65535 without leading zeros")
	errEmptyComponent = errors.New("has an empty path component (// or a trailing /)")
	errDotComponent   = errors.New("has a . or .. path component")
	errUpperCase      = errors.New("has upper-case letters in its repository path")
	errComponent      = errors.New("has a path component other than lower-case letters and digits joined by . _ __ or dashes")
	errImageID        = errors.New("is an image ID rather than a name; a runtime may resolve it to any image cached on the node")
	errPrefixTag      = errors.New("names a tag or digest; a prefix is a registry or repository path")
)

// reference is a parsed, normalized image reference.
type reference struct {
	domain string // lower-case host, with :port if given
	path   string // repository path below domain, never empty
	tag    string // without ":"
	digest string // "sha256:<hex>", without "@"
}

func (r reference) repository() string { return r.domain + "/" + r.path }

func (r reference) String() string {
	s := r.repository()
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// parseReference parses name[:tag][@digest] the way the distribution
// reference grammar and Docker's normalization do, refusing what either
// would refuse, plus the forms that are ambiguous enough to spoof a prefix.
func parseReference(s string) (reference, error) {
	if err := checkCharacters(s); err != nil {
		return reference{}, err
	}
	var ref reference
	name, digest, hasDigest := strings.Cut(s, "@")
	// A container runtime looks an image ID up among the images on the node
	// instead of pulling it, so no prefix can vouch for it. The distribution
	// grammar refuses the bare hex form too.
	if validDigest(name) || isSHA256Hex(name) {
		return reference{}, errImageID
	}
	if hasDigest {
		if strings.Contains(digest, "@") {
			return reference{}, errTooManyAt
		}
		// A "user@host/x" lands here too: its "digest" is "host/x".
		if !validDigest(digest) {
			return reference{}, errDigest
		}
		ref.digest = digest
	}
	// A ":" after the last "/" starts a tag; one before it is a port.
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		if !validTag(name[i+1:]) {
			return reference{}, errTag
		}
		name, ref.tag = name[:i], name[i+1:]
	}
	domain, path := dockerHub, name
	if first, rest, ok := strings.Cut(name, "/"); ok && isRegistry(first) {
		domain, path = first, rest
	}
	var err error
	if ref.domain, err = normalizeDomain(domain); err != nil {
		return reference{}, err
	}
	if path == "" {
		return reference{}, errNoPath
	}
	if err := checkPath(path); err != nil {
		return reference{}, err
	}
	if ref.domain == dockerHub && !strings.Contains(path, "/") {
		path = officialImages + "/" + path
	}
	ref.path = path
	if len(ref.repository()) > maxNameLength {
		return reference{}, errNameTooLong
	}
	return ref, nil
}

// normalizePrefix returns a prefix as a normalized repository without a
// trailing slash: a registry alone, or a registry and path.
func normalizePrefix(s string) (string, error) {
	if err := checkCharacters(s); err != nil {
		return "", err
	}
	if strings.Contains(s, "@") {
		return "", errPrefixTag
	}
	// One trailing slash is optional; a second is an empty component.
	s = strings.TrimSuffix(s, "/")
	if s == "" {
		return "", errEmpty
	}
	// Unlike an image, a prefix may be a registry alone ("mcr.microsoft.com/"
	// trims to "mcr.microsoft.com"), so the first component is tested
	// whether or not a "/" follows it.
	first, path, _ := strings.Cut(s, "/")
	domain := dockerHub
	if isRegistry(first) {
		domain = first
	} else {
		path = s
	}
	if strings.Contains(path, ":") {
		return "", errPrefixTag
	}
	domain, err := normalizeDomain(domain)
	if err != nil {
		return "", err
	}
	norm := domain
	if path != "" {
		if err := checkPath(path); err != nil {
			return "", err
		}
		norm += "/" + path
	}
	if len(norm) > maxNameLength {
		return "", errNameTooLong
	}
	return norm, nil
}

// checkCharacters refuses the inputs no later rule should have to reason
// about: empty, anything but printable ASCII, a URL scheme. References are
// ASCII; refusing the rest up front also keeps strings.ToLower from folding
// a look-alike such as the Kelvin sign into an ASCII host name.
func checkCharacters(s string) error {
	if s == "" {
		return errEmpty
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return errCharacters
		}
	}
	if strings.Contains(s, "://") {
		return errScheme
	}
	return nil
}

// isRegistry is Docker's rule for whether a name's first component is a
// registry. Docker also treats an upper-case first component as a registry;
// here it stays a path component and is refused for its case, which is the
// fail-closed reading of an ambiguous name.
func isRegistry(component string) bool {
	return strings.ContainsAny(component, ".:") || strings.EqualFold(component, "localhost")
}

// normalizeDomain validates host[:port], lower-cases the host and maps
// Docker Hub's aliases to docker.io.
func normalizeDomain(domain string) (string, error) {
	host, port := domain, ""
	hasPort := false
	if strings.HasPrefix(domain, "[") {
		end := strings.IndexByte(domain, ']')
		if end < 0 {
			return "", errHost
		}
		addr, err := netip.ParseAddr(domain[1:end])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", errHost
		}
		host = "[" + addr.String() + "]"
		switch rest := domain[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			port, hasPort = rest[1:], true
		default:
			return "", errHost
		}
	} else {
		host, port, hasPort = strings.Cut(domain, ":")
		host = strings.ToLower(host)
		if !validHostName(host) {
			return "", errHost
		}
	}
	if hasPort {
		if !validPort(port) {
			return "", errPort
		}
		return host + ":" + port, nil
	}
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		return dockerHub, nil
	}
	return host, nil
}

// validHostName: dot-separated labels of letters, digits and inner dashes.
func validHostName(host string) bool {
	if host == "" {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isLowerAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

// validPort refuses leading zeros so that one registry has one spelling.
func validPort(port string) bool {
	if port == "" || port[0] == '0' || len(port) > 5 {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == port
}

// checkPath validates slash-separated path components.
func checkPath(path string) error {
	for _, c := range strings.Split(path, "/") {
		switch {
		case c == "":
			return errEmptyComponent
		case c == "." || c == "..":
			return errDotComponent
		case strings.ToLower(c) != c:
			return errUpperCase
		case !validComponent(c):
			return errComponent
		}
	}
	return nil
}

// validComponent matches the distribution grammar's path-component:
// [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*.
func validComponent(c string) bool {
	i := 0
	for {
		start := i
		for i < len(c) && isLowerAlnum(c[i]) {
			i++
		}
		if i == start {
			return false
		}
		if i == len(c) {
			return true
		}
		switch c[i] {
		case '.':
			i++
		case '_':
			i++
			if i < len(c) && c[i] == '_' {
				i++
			}
		case '-':
			for i < len(c) && c[i] == '-' {
				i++
			}
		default:
			return false
		}
	}
}

// validTag matches [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
func validTag(tag string) bool {
	if tag == "" || len(tag) > maxTagLength || tag[0] == '.' || tag[0] == '-' {
		return false
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !isLowerAlnum(c) && !('A' <= c && c <= 'Z') && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// validDigest accepts sha256 only: the one algorithm registries serve, and
// one spelling per digest (lower-case hex).
func validDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, "sha256:")
	return ok && isSHA256Hex(hex)
}

func isSHA256Hex(hex string) bool {
	if len(hex) != sha256HexLength {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !('0' <= c && c <= '9') && !('a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') }
