package imagepolicy

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// defaultPrefixes is CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES's default in
// docs/configuration.md, as pkg/config splits it.
var defaultPrefixes = []string{"ghcr.io/evenfire-ai/", "mongodb/", "mcr.microsoft.com/", "clerum/", "docker.io/clerum/"}

var (
	digest    = "sha256:" + strings.Repeat("0123456789abcdef", 4)
	upperHex  = "sha256:" + strings.Repeat("0123456789ABCDEF", 4)
	longTag   = strings.Repeat("t", 129)
	longImage = "ghcr.io/evenfire-ai/" + strings.Repeat("a", 240)
)

func mustParse(t testing.TB, prefixes ...string) *Policy {
	t.Helper()
	p, err := Parse(prefixes)
	require.NoError(t, err)
	return p
}

func TestParseNormalizesPrefixes(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		want     []string
	}{
		{"the default list normalizes and merges its two clerum spellings", defaultPrefixes,
			[]string{"ghcr.io/evenfire-ai/", "docker.io/mongodb/", "mcr.microsoft.com/", "docker.io/clerum/"}},
		{"a Docker Hub namespace gets docker.io but never library", []string{"mongodb/"}, []string{"docker.io/mongodb/"}},
		{"a trailing slash is optional", []string{"mongodb", "ghcr.io/evenfire-ai"}, []string{"docker.io/mongodb/", "ghcr.io/evenfire-ai/"}},
		{"a registry alone may omit its slash", []string{"mcr.microsoft.com"}, []string{"mcr.microsoft.com/"}},
		{"library names the official images", []string{"library/"}, []string{"docker.io/library/"}},
		{"Docker Hub aliases are docker.io", []string{"index.docker.io/clerum/", "registry-1.docker.io/clerum"}, []string{"docker.io/clerum/"}},
		{"the registry host is lower-cased", []string{"GHCR.io/evenfire-ai/"}, []string{"ghcr.io/evenfire-ai/"}},
		{"localhost is a registry in any case", []string{"LOCALHOST/", "localhost:5000"}, []string{"localhost/", "localhost:5000/"}},
		{"a bracketed IPv6 registry is written canonically", []string{"[0:0::1]:5000/"}, []string{"[::1]:5000/"}},
		{"a bare host with a port is a registry, as it is before a slash", []string{"mongodb:7"}, []string{"mongodb:7/"}},
		{"a prefix may name one repository", []string{"docker.io/library/nginx"}, []string{"docker.io/library/nginx/"}},
		{"no prefixes parse to a policy that allows nothing", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.prefixes...)
			assert.Equal(t, tt.want, p.Prefixes())
			again := mustParse(t, p.Prefixes()...)
			assert.Equal(t, p.Prefixes(), again.Prefixes(), "normalizing a normalized prefix changes nothing")
		})
	}
}

// Everything here passes pkg/config, which refuses only whitespace.
func TestParseRefusesPrefixes(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		want   string
	}{
		{"an empty prefix", "", "is empty"},
		{"a slash alone", "/", "is empty"},
		{"a double trailing slash", "ghcr.io/evenfire-ai//", "empty path component"},
		{"a double slash inside", "ghcr.io//evenfire-ai/", "empty path component"},
		{"a URL scheme", "https://ghcr.io/evenfire-ai/", "URL scheme"},
		{"a tag", "ghcr.io/evenfire-ai/x:latest", "names a tag or digest"},
		{"a digest", "ghcr.io/evenfire-ai/x@" + digest, "names a tag or digest"},
		{"userinfo", "user:secret@ghcr.io/evenfire-ai/", "names a tag or digest"},
		{"an upper-case path", "ghcr.io/Evenfire-AI/", "upper-case"},
		{"an upper-case Docker Hub namespace", "MongoDB/", "upper-case"},
		{"a string prefix ending in a separator", "ghcr.io/evenfire-", "path component other than"},
		{"a wildcard", "ghcr.io/*", "path component other than"},
		{"a dot-dot component", "ghcr.io/evenfire-ai/../", ". or .. path component"},
		{"a port without a host", ":5000/", "registry host"},
		{"a host without a port", "ghcr.io:/", "registry port"},
		{"a port out of range", "localhost:65536/", "registry port"},
		{"a port with a leading zero", "localhost:05000/", "registry port"},
		{"a host label starting with a dash", "-ghcr.io/", "registry host"},
		{"an IPv6 address with a zone", "[fe80::1%eth0]:5000/", "registry host"},
		{"non-ASCII", "ghcr.io/évenfire/", "non-ASCII"},
		{"whitespace pkg/config did not trim", "ghcr.io/evenfire-ai/\t", "whitespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]string{"mcr.microsoft.com/", tt.prefix})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "allowed image prefix 2 ", "the error says which prefix")
		})
	}
}

func TestParseWithholdsAPrefixWithUserinfo(t *testing.T) {
	_, err := Parse([]string{"user:hunter2@ghcr.io/evenfire-ai/"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
	_, err = Parse([]string{"ghcr.io/evenfire-ai/x:latest"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"ghcr.io/evenfire-ai/x:latest"`, "a prefix without @ is quoted")
}

func TestJudgeDefaultPrefixes(t *testing.T) {
	policy := mustParse(t, defaultPrefixes...)
	tests := []struct {
		name      string
		image     string
		reference string // normalized, empty when invalid
		prefix    string // the matching prefix, empty when denied
		reason    Reason
	}{
		// Allowed.
		{"an image in the evenfire-ai namespace", "ghcr.io/evenfire-ai/x", "ghcr.io/evenfire-ai/x", "ghcr.io/evenfire-ai/", ReasonPrefixMatched},
		{"a nested repository with a tag", "ghcr.io/evenfire-ai/team/tool:1.2", "ghcr.io/evenfire-ai/team/tool:1.2", "ghcr.io/evenfire-ai/", ReasonPrefixMatched},
		{"an upper-case registry host is lower-cased", "GHCR.IO/evenfire-ai/x", "ghcr.io/evenfire-ai/x", "ghcr.io/evenfire-ai/", ReasonPrefixMatched},
		{"a prefix matches the repository it names", "ghcr.io/evenfire-ai:1", "ghcr.io/evenfire-ai:1", "ghcr.io/evenfire-ai/", ReasonPrefixMatched},
		{"a digest is kept in the reference", "ghcr.io/evenfire-ai/x@" + digest, "ghcr.io/evenfire-ai/x@" + digest, "ghcr.io/evenfire-ai/", ReasonPrefixMatched},
		{"a tag and a digest are both kept", "ghcr.io/evenfire-ai/x:1@" + digest, "ghcr.io/evenfire-ai/x:1@" + digest, "ghcr.io/evenfire-ai/", ReasonPrefixMatched},
		{"a Docker Hub short name in the mongodb namespace", "mongodb/mongodb-community-server:7.0-ubi8", "docker.io/mongodb/mongodb-community-server:7.0-ubi8", "docker.io/mongodb/", ReasonPrefixMatched},
		{"the mongodb namespace spelled with docker.io", "docker.io/mongodb/x", "docker.io/mongodb/x", "docker.io/mongodb/", ReasonPrefixMatched},
		{"the mongodb namespace spelled with index.docker.io", "index.docker.io/mongodb/x", "docker.io/mongodb/x", "docker.io/mongodb/", ReasonPrefixMatched},
		{"the mongodb namespace spelled with registry-1.docker.io", "registry-1.docker.io/mongodb/x", "docker.io/mongodb/x", "docker.io/mongodb/", ReasonPrefixMatched},
		{"a Microsoft image with a tag", "mcr.microsoft.com/playwright/mcp:latest", "mcr.microsoft.com/playwright/mcp:latest", "mcr.microsoft.com/", ReasonPrefixMatched},
		{"a clerum image named with docker.io", "docker.io/clerum/stdio-bridge:0.9.5", "docker.io/clerum/stdio-bridge:0.9.5", "docker.io/clerum/", ReasonPrefixMatched},
		{"a clerum image by its short name", "clerum/stdio-bridge:0.9.5", "docker.io/clerum/stdio-bridge:0.9.5", "docker.io/clerum/", ReasonPrefixMatched},
		{"separators the grammar allows", "ghcr.io/evenfire-ai/a.b_c__d--e:V1_x.y-z", "ghcr.io/evenfire-ai/a.b_c__d--e:V1_x.y-z", "ghcr.io/evenfire-ai/", ReasonPrefixMatched},

		// Well formed, denied: the spoofing cases of issue 9.
		{"a path component that extends the namespace with a domain", "ghcr.io/evenfire-ai.evil.com/x", "ghcr.io/evenfire-ai.evil.com/x", "", ReasonNoPrefixMatched},
		{"a registry whose host extends ghcr.io", "ghcr.io.evil.com/evenfire-ai/x", "ghcr.io.evil.com/evenfire-ai/x", "", ReasonNoPrefixMatched},
		{"a namespace that extends evenfire-ai", "ghcr.io/evenfire-aix/y", "ghcr.io/evenfire-aix/y", "", ReasonNoPrefixMatched},
		{"the mongodb namespace on another registry", "evil.io/mongodb/x", "evil.io/mongodb/x", "", ReasonNoPrefixMatched},
		{"a Docker Hub namespace that extends mongodb", "docker.io/mongodbx/y", "docker.io/mongodbx/y", "", ReasonNoPrefixMatched},
		{"the official mongodb image is not the mongodb namespace", "mongodb", "docker.io/library/mongodb", "", ReasonNoPrefixMatched},
		{"mongodb:latest is the official image", "mongodb:latest", "docker.io/library/mongodb:latest", "", ReasonNoPrefixMatched},
		{"a digest on the official image", "mongodb@" + digest, "docker.io/library/mongodb@" + digest, "", ReasonNoPrefixMatched},
		{"docker.io/mongodb is the official image", "docker.io/mongodb", "docker.io/library/mongodb", "", ReasonNoPrefixMatched},
		{"an explicit port is another registry", "ghcr.io:443/evenfire-ai/x", "ghcr.io:443/evenfire-ai/x", "", ReasonNoPrefixMatched},
		{"a Microsoft look-alike host", "mcr.microsoft.com.evil.io/x", "mcr.microsoft.com.evil.io/x", "", ReasonNoPrefixMatched},
		{"a local registry with a port", "localhost:5000/x", "localhost:5000/x", "", ReasonNoPrefixMatched},
		{"localhost is a registry in any case", "LocalHost/evenfire-ai/x", "localhost/evenfire-ai/x", "", ReasonNoPrefixMatched},
		{"a bracketed IPv6 registry", "[0:0::1]:5000/x:1", "[::1]:5000/x:1", "", ReasonNoPrefixMatched},
		{"a host and port without a slash is an image and a tag", "localhost:5000", "docker.io/library/localhost:5000", "", ReasonNoPrefixMatched},

		// Invalid, refused whatever the prefixes say.
		{"an empty image", "", "", "", ReasonInvalidReference},
		{"whitespace alone", " ", "", "", ReasonInvalidReference},
		{"leading whitespace", " mongodb/x", "", "", ReasonInvalidReference},
		{"a trailing newline", "mongodb/x\n", "", "", ReasonInvalidReference},
		{"an @ that is no digest", "mongodb@evil", "", "", ReasonInvalidReference},
		{"userinfo before an allowed registry", "user@ghcr.io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"userinfo with a password", "user:secret@ghcr.io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"an https scheme", "https://ghcr.io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"an oci scheme", "oci://ghcr.io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"a scheme without slashes", "http:ghcr.io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"dot-dot after docker.io", "docker.io/../x", "", "", ReasonInvalidReference},
		{"dot-dot climbing out of an allowed namespace", "ghcr.io/evenfire-ai/../evil/x", "", "", ReasonInvalidReference},
		{"a dot component", "ghcr.io/evenfire-ai/./x", "", "", ReasonInvalidReference},
		{"a double slash", "ghcr.io//evenfire-ai/x", "", "", ReasonInvalidReference},
		{"a trailing slash", "ghcr.io/evenfire-ai/x/", "", "", ReasonInvalidReference},
		{"a registry without a path", "ghcr.io/", "", "", ReasonInvalidReference},
		{"a short digest", "ghcr.io/evenfire-ai/x@sha256:abc", "", "", ReasonInvalidReference},
		{"an upper-case hex digest", "ghcr.io/evenfire-ai/x@" + upperHex, "", "", ReasonInvalidReference},
		{"a digest of another algorithm", "ghcr.io/evenfire-ai/x@sha512:" + strings.Repeat("ab", 64), "", "", ReasonInvalidReference},
		{"a digest without an algorithm", "ghcr.io/evenfire-ai/x@" + strings.TrimPrefix(digest, "sha256:"), "", "", ReasonInvalidReference},
		{"two digests", "ghcr.io/evenfire-ai/x@" + digest + "@" + digest, "", "", ReasonInvalidReference},
		{"a tag with a plus", "ghcr.io/evenfire-ai/x:v1+build", "", "", ReasonInvalidReference},
		{"a tag starting with a dash", "ghcr.io/evenfire-ai/x:-v1", "", "", ReasonInvalidReference},
		{"an empty tag", "ghcr.io/evenfire-ai/x:", "", "", ReasonInvalidReference},
		{"a tag of 129 characters", "ghcr.io/evenfire-ai/x:" + longTag, "", "", ReasonInvalidReference},
		{"a port without a host", ":5000/x", "", "", ReasonInvalidReference},
		{"a host with an empty port", "ghcr.io:/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"port zero", "localhost:0/x", "", "", ReasonInvalidReference},
		{"a port with a leading zero", "localhost:05000/x", "", "", ReasonInvalidReference},
		{"a port that is not a number", "localhost:http/x", "", "", ReasonInvalidReference},
		{"an upper-case path", "ghcr.io/Evenfire-AI/x", "", "", ReasonInvalidReference},
		{"an upper-case first component without a dot", "MongoDB/x", "", "", ReasonInvalidReference},
		{"an upper-case single name", "MongoDB", "", "", ReasonInvalidReference},
		{"a component ending in a separator", "ghcr.io/evenfire-ai/x_", "", "", ReasonInvalidReference},
		{"a component starting with a separator", "ghcr.io/evenfire-ai/-x", "", "", ReasonInvalidReference},
		{"three underscores", "ghcr.io/evenfire-ai/x___y", "", "", ReasonInvalidReference},
		{"a registry host label starting with a dash", "-ghcr.io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"a registry host with an empty label", "ghcr..io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"an IPv6 registry with a zone", "[fe80::1%eth0]:5000/x", "", "", ReasonInvalidReference},
		{"an IPv4 address in brackets", "[10.0.0.1]:5000/x", "", "", ReasonInvalidReference},
		{"a combining accent", "ghcr.io/evenfire-ai/xe\u0301", "", "", ReasonInvalidReference},
		{"a Kelvin sign that lower-cases to k", "\u212Aeycloak.io/evenfire-ai/x", "", "", ReasonInvalidReference},
		{"a NUL byte", "ghcr.io/evenfire-ai/x\x00", "", "", ReasonInvalidReference},
		{"a name longer than 255 characters", longImage, "", "", ReasonInvalidReference},
		{"an image ID in hex", strings.TrimPrefix(digest, "sha256:"), "", "", ReasonInvalidReference},
		{"an image ID with its algorithm", digest, "", "", ReasonInvalidReference},
		{"an image ID with a digest after it", digest + "@" + digest, "", "", ReasonInvalidReference},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := policy.Judge(tt.image)
			assert.Equal(t, tt.reason, v.Reason, "detail: %s", v.Detail)
			assert.Equal(t, tt.reason == ReasonPrefixMatched, v.Allowed)
			assert.Equal(t, tt.reference, v.Reference)
			assert.Equal(t, tt.prefix, v.Prefix)
			if tt.reason == ReasonInvalidReference {
				assert.NotEmpty(t, v.Detail)
				assert.Empty(t, v.Repository)
				return
			}
			assert.Empty(t, v.Detail)
			normalized, err := Normalize(tt.image)
			require.NoError(t, err)
			assert.Equal(t, tt.reference, normalized)
			again, err := Normalize(normalized)
			require.NoError(t, err)
			assert.Equal(t, normalized, again, "normalization is idempotent")
		})
	}
}

func TestJudgeConfiguredPrefixes(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		image    string
		prefix   string // the matching prefix, empty when denied
	}{
		{"a bare namespace matches below it", []string{"mongodb"}, "mongodb/x", "docker.io/mongodb/"},
		{"a bare namespace is not the official image of that name", []string{"mongodb"}, "mongodb", ""},
		{"a bare path keeps its boundary", []string{"ghcr.io/evenfire-ai"}, "ghcr.io/evenfire-aix/y", ""},
		{"a bare path matches below it", []string{"ghcr.io/evenfire-ai"}, "ghcr.io/evenfire-ai/x", "ghcr.io/evenfire-ai/"},
		{"library allows official images", []string{"library/"}, "nginx:1", "docker.io/library/"},
		{"one official image", []string{"docker.io/library/nginx"}, "nginx@" + digest, "docker.io/library/nginx/"},
		{"one official image is not its look-alike", []string{"docker.io/library/nginx"}, "nginx-evil", ""},
		{"a registry with a port", []string{"localhost:5000/"}, "localhost:5000/x", "localhost:5000/"},
		{"a registry with a port is not the same host without it", []string{"localhost:5000/"}, "localhost/x", ""},
		{"a registry with a port is not the same host on another port", []string{"localhost:5000/"}, "localhost:5001/x", ""},
		{"a registry host in upper case", []string{"LOCALHOST:5000"}, "localhost:5000/x", "localhost:5000/"},
		{"an IPv6 registry spelled two ways", []string{"[::1]:5000/"}, "[0:0::1]:5000/x", "[::1]:5000/"},
		{"a registry alone without its slash", []string{"mcr.microsoft.com"}, "mcr.microsoft.com/playwright/mcp", "mcr.microsoft.com/"},
		{"a registry alone is not a host that extends it", []string{"mcr.microsoft.com"}, "mcr.microsoft.com.evil.io/x", ""},
		{"all of Docker Hub", []string{"docker.io/"}, "mongodb/x", "docker.io/"},
		{"all of Docker Hub is not another registry", []string{"docker.io/"}, "ghcr.io/x", ""},
		{"a Docker Hub alias in a prefix", []string{"index.docker.io/clerum/"}, "clerum/x", "docker.io/clerum/"},
		{"the first matching prefix in configuration order is reported", []string{"ghcr.io/", "ghcr.io/evenfire-ai/"}, "ghcr.io/evenfire-ai/x", "ghcr.io/"},
		{"no prefixes allow nothing", nil, "ghcr.io/evenfire-ai/x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustParse(t, tt.prefixes...).Judge(tt.image)
			require.NotEqual(t, ReasonInvalidReference, v.Reason, v.Detail)
			assert.Equal(t, tt.prefix != "", v.Allowed)
			assert.Equal(t, tt.prefix, v.Prefix)
		})
	}
}

func TestNilPolicyAllowsNothing(t *testing.T) {
	var p *Policy
	v := p.Judge("ghcr.io/evenfire-ai/x")
	assert.False(t, v.Allowed)
	assert.Equal(t, ReasonNoPrefixMatched, v.Reason)
	assert.Equal(t, "ghcr.io/evenfire-ai/x", v.Reference)
	assert.Nil(t, p.Prefixes())
	assert.False(t, (&Policy{}).Judge("ghcr.io/evenfire-ai/x").Allowed, "the zero Policy allows nothing")
}

func TestVerdictMessage(t *testing.T) {
	policy := mustParse(t, defaultPrefixes...)
	tests := []struct {
		name  string
		image string
		want  string
	}{
		{"an allowed image names its prefix", "clerum/stdio-bridge:0.9.5", "image docker.io/clerum/stdio-bridge:0.9.5 is under allowed prefix docker.io/clerum/"},
		{"a denied image is named normalized", "mongodb", "image docker.io/library/mongodb is under no allowed prefix"},
		{"an invalid image is not quoted", "user:hunter2@ghcr.io/evenfire-ai/x", "image reference has an @ that does not introduce a sha256 digest of 64 lower-case hex digits"},
		{"an empty image", "", "image reference is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, policy.Judge(tt.image).Message())
		})
	}
}

// FuzzJudge checks the invariants that make the allowlist safe whatever the
// input: no panic; a verdict either invalid and empty, or normalized and
// stable; an allowed repository is at or below a configured prefix at a
// path boundary; normalization of images and prefixes is idempotent.
func FuzzJudge(f *testing.F) {
	seeds := []string{
		"ghcr.io/evenfire-ai/x", "ghcr.io/evenfire-ai.evil.com/x", "ghcr.io/evenfire-aix/y", "evil.io/mongodb/x",
		"docker.io/mongodbx/y", "mongodb@evil", "mongodb:latest", "mongodb", "index.docker.io/mongodb/x",
		"localhost:5000/x", "mcr.microsoft.com/playwright/mcp:latest", "docker.io/clerum/stdio-bridge:0.9.5",
		"ghcr.io/evenfire-ai/x:1@" + digest, "user@ghcr.io/x", "https://ghcr.io/x", "docker.io/../x",
		"ghcr.io//x", ":5000/x", "[::1]:5000/x", "GHCR.IO/evenfire-ai/x", "ghcr.io/Evenfire/x", "",
	}
	for i, s := range seeds {
		f.Add(s, defaultPrefixes[i%len(defaultPrefixes)])
	}
	f.Add("nginx", "library")
	f.Add("localhost:5000/x", "localhost:5000")
	defaults := mustParse(f, defaultPrefixes...)

	f.Fuzz(func(t *testing.T, image, prefix string) {
		checkVerdict(t, defaults, image)

		policy, err := Parse([]string{prefix})
		if !strings.HasSuffix(prefix, "/") {
			slashed, slashErr := Parse([]string{prefix + "/"})
			require.Equal(t, err == nil, slashErr == nil, "a trailing slash changes nothing")
			if err == nil {
				require.Equal(t, policy.Prefixes(), slashed.Prefixes())
			}
		}
		if err != nil {
			return
		}
		again, err := Parse(policy.Prefixes())
		require.NoError(t, err, "a normalized prefix parses")
		require.Equal(t, policy.Prefixes(), again.Prefixes(), "prefix normalization is idempotent")
		checkVerdict(t, policy, image)
	})
}

func checkVerdict(t *testing.T, policy *Policy, image string) {
	t.Helper()
	v := policy.Judge(image)
	normalized, err := Normalize(image)
	if v.Reason == ReasonInvalidReference {
		require.Error(t, err)
		require.False(t, v.Allowed)
		require.Empty(t, v.Reference+v.Repository+v.Prefix)
		require.NotEmpty(t, v.Detail)
		return
	}
	require.NoError(t, err)
	require.Equal(t, normalized, v.Reference)
	require.Empty(t, v.Detail)

	again, err := Normalize(v.Reference)
	require.NoError(t, err)
	require.Equal(t, v.Reference, again, "normalization is idempotent")
	require.Equal(t, v, policy.Judge(v.Reference), "the normalized reference judges the same")

	// The reference is the repository and then only a tag or digest.
	require.True(t, strings.HasPrefix(v.Reference, v.Repository))
	if rest := v.Reference[len(v.Repository):]; rest != "" {
		require.Contains(t, ":@", rest[:1])
	}
	require.Contains(t, v.Repository, "/", "a repository has a registry and a path")

	if !v.Allowed {
		require.Equal(t, ReasonNoPrefixMatched, v.Reason)
		require.Empty(t, v.Prefix)
		for _, p := range policy.Prefixes() {
			require.False(t, strings.HasPrefix(v.Repository+"/", p), "a denied repository is below no prefix %s", p)
		}
		return
	}
	require.Equal(t, ReasonPrefixMatched, v.Reason)
	require.True(t, slices.Contains(policy.Prefixes(), v.Prefix), "the matching prefix is a configured one")
	boundary := strings.TrimSuffix(v.Prefix, "/")
	require.True(t, strings.HasPrefix(v.Reference, boundary))
	if rest := v.Reference[len(boundary):]; rest != "" {
		require.Contains(t, "/:@", rest[:1], "an allowed reference continues its prefix at a path boundary")
	}
	require.True(t, strings.HasPrefix(v.Repository+"/", v.Prefix), "the repository is at or below the prefix")
}
