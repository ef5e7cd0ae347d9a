// Package imagepolicy judges a local McpServer's spec.image against the
// trusted prefixes of CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES. It is pure: no
// clients, no I/O, so the McpServer controller and `hcc-controller render`
// reach the same verdict for the same image.
//
// Images and prefixes are compared as normalized references, following the
// rules container runtimes use to decide what they pull:
//
//   - The first path component names a registry only if it holds a "." or
//     a ":" or is "localhost"; otherwise the registry is docker.io. The
//     aliases index.docker.io and registry-1.docker.io are docker.io.
//   - A Docker Hub image of a single component is an official image under
//     library/, so "mongodb" is docker.io/library/mongodb. A prefix is never
//     given library/: it names a namespace, so "mongodb/" is
//     docker.io/mongodb/.
//   - The registry host is lower-cased. A repository path must already be
//     lower case, as the distribution spec requires; an upper-case path is
//     refused rather than folded, since two spellings of one path would
//     otherwise judge differently from how they pull.
//   - The tag and digest are not part of the prefix test. The normalized
//     reference a verdict reports keeps both.
//
// A prefix matches at path boundaries only: "ghcr.io/evenfire-ai/" matches
// ghcr.io/evenfire-ai/x but not ghcr.io/evenfire-aix/y or
// ghcr.io/evenfire-ai.evil.com/x. A trailing slash is optional and changes
// nothing: "mongodb" is the namespace docker.io/mongodb/, exactly like
// "mongodb/", and a prefix also matches the repository it names itself
// ("ghcr.io/acme/tool" matches ghcr.io/acme/tool:1). Reading a bare name as a
// namespace keeps one meaning per prefix whatever its punctuation; on every
// mainstream registry whoever controls a repository path controls the paths
// below it, so matching the path itself grants nobody new.
//
// Everything fails closed. Parse refuses a prefix it cannot normalize, so a
// mistyped allowlist stops the process at startup instead of allowing or
// denying by accident. Judge refuses a reference that a runtime would refuse
// or could read differently (a URL scheme, userinfo, "..", "//", a digest
// that is not sha256 with 64 lower-case hex digits, a bad tag, more than one
// "@", a port without a host, an upper-case path), and a nil Policy allows
// nothing. A verdict's Message never quotes an image that failed to parse,
// since a string with an "@" in it may carry credentials.
package imagepolicy
