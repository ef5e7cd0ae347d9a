package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// group is one section of the variable table and of docs/configuration.md.
type group struct {
	title string
	note  string // optional paragraph under the title
	vars  []variable
}

// variable declares one environment variable.
type variable struct {
	name string
	// def is the default in the variable's own syntax. It goes through the
	// same parser as a set value, so a bad default fails every load.
	def string
	// docDefault, when set, is shown instead of def (for defaults computed at
	// load time, or supplied by Kubernetes).
	docDefault string
	desc       string
	// readBy lists the components that read the variable; zero means all.
	readBy components
	field  field
	cross  *crossCheck
	warn   *warning
}

// value returns the text to parse: the set value, or the default when the
// variable is unset or the field counts the set value as blank.
func (v *variable) value(lookup func(string) (string, bool)) string {
	s, ok := lookup(v.name)
	if !ok || (v.field.blank != nil && v.field.blank(s)) {
		return v.def
	}
	return s
}

// field turns a variable's text into its typed Config field.
type field struct {
	rule string // the parsing rule, as docs/configuration.md shows it
	// blank reports whether a set value counts as unset. Nil keeps getEnv
	// semantics: a set value wins over the default even when empty.
	blank func(string) bool
	// set parses s into c. The error is a reason without the variable name
	// and must not quote secrets.
	set func(c *Config, s string) error
}

// crossCheck is a rule that reads other variables. It runs after every
// variable is parsed and is reported under the variable that declares it.
type crossCheck struct {
	needs []string // the other variables it reads
	check func(c *Config) error
}

// warning is a startup notice for a legal but risky value.
type warning struct {
	shownBy components           // zero means every component that reads the variable
	text    func(*Config) string // empty when there is nothing to say
}

// components is a set of Components; the zero set means all of them.
type components uint8

func only(cs ...Component) components {
	var set components
	for _, c := range cs {
		set |= 1 << c
	}
	return set
}

func (cs components) has(c Component) bool {
	return cs == 0 || cs&(1<<c) != 0
}

func isEmpty(s string) bool { return s == "" }

// text is a getEnv string: a set value is used as is, even when empty, which
// is how an empty pull-secret name disables imagePullSecrets.
func text(p func(*Config) *string) field {
	return field{
		rule: "string; empty overrides the default",
		set:  func(c *Config, s string) error { *p(c) = s; return nil },
	}
}

// boolean accepts only the two spellings of each value. A lenient reading
// that made every other value false would turn HCC_LEADER_ELECT=yes into no
// leader election and CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST=on into audit
// mode; a value that is neither spelling fails closed instead.
func boolean(p func(*Config) *bool) field {
	return field{
		rule:  "`true` or `1`, `false` or `0` (any case)",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			switch {
			case strings.EqualFold(s, "true") || s == "1":
				*p(c) = true
			case strings.EqualFold(s, "false") || s == "0":
				*p(c) = false
			default:
				return fmt.Errorf("%q is not true, false, 1 or 0", s)
			}
			return nil
		},
	}
}

// canonicalInt admits one spelling per integer. The seed parsed integers with
// JavaScript's parseInt, which read "25m" as 25 and "1e3" as 1; rejecting
// every other spelling keeps such typos from becoming silent settings.
var canonicalInt = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)

// parseInt parses a canonical decimal in [lo, hi]. lo is never negative: no
// variable gives a negative number a meaning.
func parseInt(s string, lo, hi int64) (int64, error) {
	if !canonicalInt.MatchString(s) {
		return 0, fmt.Errorf("%q is not a canonical decimal integer", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%q is out of range", s)
	case n < 0:
		return 0, fmt.Errorf("must not be negative (got %d)", n)
	case n < lo:
		return 0, fmt.Errorf("must be at least %d (got %d)", lo, n)
	case n > hi:
		return 0, fmt.Errorf("must be at most %d (got %d)", hi, n)
	}
	return n, nil
}

func intRule(lo, hi int64) string {
	if hi == math.MaxInt64 {
		return fmt.Sprintf("integer ≥ %d", lo)
	}
	return fmt.Sprintf("integer %d–%d", lo, hi)
}

// integer is a count in [lo, hi] that must also fit T.
func integer[T int | int32 | int64](p func(*Config) *T, lo, hi int64) field {
	return field{
		rule:  intRule(lo, hi),
		blank: isEmpty,
		set: func(c *Config, s string) error {
			n, err := parseInt(s, lo, hi)
			if err != nil {
				return err
			}
			if int64(T(n)) != n {
				return fmt.Errorf("%q is out of range", s)
			}
			*p(c) = T(n)
			return nil
		},
	}
}

func port(p func(*Config) *int32) field {
	f := integer(p, 1, 65535)
	f.rule = "port 1–65535"
	return f
}

// qps is a client-go rate. It is a float in client-go but an integer here, so
// it follows the same canonical-decimal rule as every other number.
func qps(p func(*Config) *float32) field {
	return field{
		rule:  intRule(1, math.MaxInt64),
		blank: isEmpty,
		set: func(c *Config, s string) error {
			n, err := parseInt(s, 1, math.MaxInt64)
			if err != nil {
				return err
			}
			*p(c) = float32(n)
			return nil
		},
	}
}

// seconds and milliseconds are durations written as integers. With lo 0 the
// value 0 is accepted and, for resync intervals, disables the timer.
func seconds(p func(*Config) *time.Duration, lo int64) field {
	return duration(p, time.Second, "seconds", lo)
}

func milliseconds(p func(*Config) *time.Duration, lo int64) field {
	return duration(p, time.Millisecond, "milliseconds", lo)
}

func duration(p func(*Config) *time.Duration, unit time.Duration, unitName string, lo int64) field {
	hi := int64(math.MaxInt64 / unit)
	return field{
		rule:  fmt.Sprintf("%s ≥ %d", unitName, lo),
		blank: isEmpty,
		set: func(c *Config, s string) error {
			n, err := parseInt(s, lo, hi)
			if err != nil {
				return err
			}
			*p(c) = time.Duration(n) * unit
			return nil
		},
	}
}

func pullPolicy(p func(*Config) *corev1.PullPolicy) field {
	return field{
		rule:  "`Always`, `IfNotPresent` or `Never`",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			switch policy := corev1.PullPolicy(s); policy {
			case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
				*p(c) = policy
				return nil
			}
			return fmt.Errorf("%q is not Always, IfNotPresent or Never", s)
		},
	}
}

func image(p func(*Config) *string) field {
	return field{
		rule:  "image reference without whitespace",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			if strings.ContainsFunc(s, unicode.IsSpace) {
				return fmt.Errorf("%q contains whitespace", s)
			}
			*p(c) = s
			return nil
		},
	}
}

// nonBlank is a validated string, such as a token issuer, that must say
// something: a blank issuer or audience would match nothing or everything.
func nonBlank(p func(*Config) *string) field {
	return field{
		rule:  "non-blank string",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			if strings.TrimSpace(s) == "" {
				return errors.New("must not be blank")
			}
			*p(c) = s
			return nil
		},
	}
}

func parseQuantity(s string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return q, fmt.Errorf("%q is not a resource quantity", s)
	}
	if q.Sign() < 0 {
		return q, fmt.Errorf("%q is negative", s)
	}
	return q, nil
}

// size is a storage request; the API server rejects a claim for zero bytes.
func size(p func(*Config) *resource.Quantity) field {
	return field{
		rule:  "resource quantity > 0",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			q, err := parseQuantity(s)
			if err != nil {
				return err
			}
			if q.IsZero() {
				return errors.New("must be greater than zero")
			}
			*p(c) = q
			return nil
		},
	}
}

func request(r func(*Config) *corev1.ResourceRequirements, name corev1.ResourceName) field {
	f := quantityIn(func(c *Config) *corev1.ResourceList { return &r(c).Requests }, name)
	f.rule += ", at most the limit"
	return f
}

func limit(r func(*Config) *corev1.ResourceRequirements, name corev1.ResourceName) field {
	return quantityIn(func(c *Config) *corev1.ResourceList { return &r(c).Limits }, name)
}

func quantityIn(list func(*Config) *corev1.ResourceList, name corev1.ResourceName) field {
	return field{
		rule:  "resource quantity ≥ 0",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			q, err := parseQuantity(s)
			if err != nil {
				return err
			}
			l := list(c)
			if *l == nil {
				*l = corev1.ResourceList{}
			}
			(*l)[name] = q
			return nil
		},
	}
}

// withinLimit rejects a request above its limit at startup: the API server
// would reject every Deployment built from it, one reconcile at a time.
func withinLimit(r func(*Config) *corev1.ResourceRequirements, name corev1.ResourceName, limitVar string) *crossCheck {
	return &crossCheck{
		needs: []string{limitVar},
		check: func(c *Config) error {
			req, lim := r(c).Requests[name], r(c).Limits[name]
			if req.Cmp(lim) > 0 {
				return fmt.Errorf("request %s exceeds the limit %s set by %s", req.String(), lim.String(), limitVar)
			}
			return nil
		},
	}
}

// validated builds a string field checked by a Kubernetes validation function,
// which returns human-readable reasons.
func validated(rule string, validate func(string) []string, p func(*Config) *string) field {
	return field{
		rule:  rule,
		blank: isEmpty,
		set: func(c *Config, s string) error {
			if msgs := validate(s); len(msgs) > 0 {
				return fmt.Errorf("%q: %s", s, strings.Join(msgs, ", "))
			}
			*p(c) = s
			return nil
		},
	}
}

// validateIPPort accepts an IP literal and a port number, as net.Dial
// takes them: "127.0.0.1:53", "[::1]:5353".
func validateIPPort(s string) []string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return []string{err.Error()}
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return []string{"the host must be an IP address"}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return []string{"the port must be a number from 1 to 65535"}
	}
	return nil
}

func dnsLabel(p func(*Config) *string) field {
	return validated("DNS-1123 label", validation.IsDNS1123Label, p)
}

func dnsSubdomain(p func(*Config) *string) field {
	return validated("DNS-1123 subdomain", validation.IsDNS1123Subdomain, p)
}

func dataKey(p func(*Config) *string) field {
	return validated("ConfigMap/Secret key", validation.IsConfigMapKey, p)
}

// labelValue rejects the empty value, which is a valid label value but would
// select every pod without the label.
func labelValue(p func(*Config) *string) field {
	return validated("non-empty label value", validation.IsValidLabelValue, p)
}

// optional lets a validated field whose default is empty stay unset.
func optional(f field) field {
	set := f.set
	f.rule = "empty, or " + f.rule
	f.set = func(c *Config, s string) error {
		if s == "" {
			return nil
		}
		return set(c, s)
	}
	return f
}

// splitList splits a comma-separated list, trimming spaces and dropping blank
// items, so "a, b," is two items and " , " is none.
func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

func isBlankList(s string) bool { return len(splitList(s)) == 0 }

func namespaceList(p func(*Config) *[]string) field {
	return field{
		rule:  "comma-separated DNS-1123 labels, no duplicates",
		blank: isBlankList,
		set: func(c *Config, s string) error {
			items := splitList(s)
			seen := make(map[string]bool, len(items))
			for _, ns := range items {
				if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
					return fmt.Errorf("namespace %q: %s", ns, strings.Join(msgs, ", "))
				}
				if seen[ns] {
					return fmt.Errorf("namespace %q is listed twice", ns)
				}
				seen[ns] = true
			}
			*p(c) = items
			return nil
		},
	}
}

func prefixList(p func(*Config) *[]string) field {
	return field{
		rule:  "comma-separated prefixes without whitespace",
		blank: isBlankList,
		set: func(c *Config, s string) error {
			items := splitList(s)
			for _, prefix := range items {
				if strings.ContainsFunc(prefix, unicode.IsSpace) {
					return fmt.Errorf("prefix %q contains whitespace", prefix)
				}
			}
			*p(c) = items
			return nil
		},
	}
}

// httpURL is a base URL that HCC appends paths to. Reasons do not quote the
// value, which could carry credentials.
func httpURL(p func(*Config) *string) field {
	return field{
		rule:  "absolute `http` or `https` URL",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			u, err := url.Parse(s)
			switch {
			case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
				return errors.New("must be an absolute http or https URL")
			case u.User != nil:
				return errors.New("must not embed credentials")
			case u.RawQuery != "" || u.Fragment != "":
				return errors.New("must not have a query or fragment")
			}
			*p(c) = strings.TrimRight(s, "/")
			return nil
		},
	}
}

// pastTimestamp is an RFC 3339 instant no later than the moment the
// configuration is loaded; empty leaves it zero (unset). A cutoff in the
// future would keep moving past objects written after the binary started,
// which is what the variables that take one (a migration's "created
// before") must never cover.
func pastTimestamp(p func(*Config) *time.Time, now func() time.Time) field {
	return field{
		rule:  "empty, or an RFC 3339 timestamp (`2026-01-31T12:00:00Z`) not in the future",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			if s == "" {
				*p(c) = time.Time{}
				return nil
			}
			t, err := time.Parse(time.RFC3339, s)
			switch {
			case err != nil:
				return fmt.Errorf("%q is not an RFC 3339 timestamp", s)
			case t.After(now()):
				return fmt.Errorf("%q lies in the future", s)
			}
			*p(c) = t
			return nil
		},
	}
}

// logLevel is lenient on purpose (docs/configuration.md): an unknown level is
// not worth refusing to start over, so it means info.
func logLevel(p func(*Config) *string) field {
	return field{
		rule:  "`debug`, `info`, `warn` or `error` (any case); anything else means `info`",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			switch level := strings.ToLower(s); level {
			case "debug", "info", "warn", "error":
				*p(c) = level
			default:
				*p(c) = "info"
			}
			return nil
		},
	}
}

// hostnameDefault is a string whose default is the hostname, which is the pod
// name in a cluster and unique enough for leader election elsewhere.
func hostnameDefault(p func(*Config) *string) field {
	return field{
		rule:  "string; empty means the hostname",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			if s == "" {
				h, err := os.Hostname()
				if err != nil || h == "" {
					return errors.New("unset, and the hostname is unavailable")
				}
				s = h
			}
			*p(c) = s
			return nil
		},
	}
}

// isPlaceholder reports whether s is a "replace-with-…" value copied from an
// example manifest rather than real key material.
func isPlaceholder(s string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), "replace-with-")
}
