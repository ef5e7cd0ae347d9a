package config

import (
	"fmt"
	"net/netip"
	"slices"
)

// The broadest API-server CIDRs accepted. allow-k8s-api-egress-* opens egress
// to every address in them, so a wide entry would quietly turn an allow for
// the API server into an allow for a whole network.
const (
	maxIPv4APIServerPrefix = 24
	maxIPv6APIServerPrefix = 120
)

// defaultAPIServerCIDR is the kubernetes Service address in a cluster with
// the default Service range 10.96.0.0/12, used when nothing better is known.
var defaultAPIServerCIDR = netip.MustParsePrefix("10.96.0.1/32")

func apiServerCIDRs(p func(*Config) *[]netip.Prefix) field {
	return field{
		rule:  fmt.Sprintf("comma-separated CIDRs, each /%d or narrower (IPv4) or /%d or narrower (IPv6)", maxIPv4APIServerPrefix, maxIPv6APIServerPrefix),
		blank: isBlankList,
		set: func(c *Config, s string) error {
			var prefixes []netip.Prefix
			for _, item := range splitList(s) {
				prefix, err := parseAPIServerCIDR(item)
				if err != nil {
					return err
				}
				prefixes = append(prefixes, prefix)
			}
			*p(c) = prefixes
			return nil
		},
	}
}

func parseAPIServerCIDR(s string) (netip.Prefix, error) {
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		return prefix, fmt.Errorf("entry %q is not a CIDR", s)
	}
	if prefix.Addr().Is4In6() {
		return prefix, fmt.Errorf("entry %q is IPv4-mapped IPv6; write it as IPv4", s)
	}
	broadest := maxIPv6APIServerPrefix
	if prefix.Addr().Is4() {
		broadest = maxIPv4APIServerPrefix
	}
	if prefix.Bits() < broadest {
		return prefix, fmt.Errorf("entry %q is broader than /%d", s, broadest)
	}
	// "10.0.0.1/24" could mean the host or the network; refuse to guess.
	if prefix != prefix.Masked() {
		return prefix, fmt.Errorf("entry %q has host bits set (the network is %s)", s, prefix.Masked())
	}
	return prefix, nil
}

// resolveAPIServerCIDRs fills NetPol.K8sAPICIDRs when CONTEXT_MAPPER_K8S_API_CIDRS
// is empty: first from KUBERNETES_SERVICE_HOST as a single address, then from
// the hard default. A KUBERNETES_SERVICE_HOST that is not an IP fails rather
// than being skipped, since it means the pod sees an unexpected environment.
func resolveAPIServerCIDRs(c *Config) error {
	n := &c.NetPol
	switch {
	case len(n.K8sAPICIDRs) > 0:
		n.K8sAPICIDRSource = "CONTEXT_MAPPER_K8S_API_CIDRS"
	case n.KubernetesServiceHost != "":
		addr, err := netip.ParseAddr(n.KubernetesServiceHost)
		if err != nil || addr.Zone() != "" {
			return fmt.Errorf("%q is not an IP address, so it cannot stand in for an empty CONTEXT_MAPPER_K8S_API_CIDRS", n.KubernetesServiceHost)
		}
		addr = addr.Unmap()
		n.K8sAPICIDRs = []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())}
		n.K8sAPICIDRSource = "KUBERNETES_SERVICE_HOST"
	default:
		n.K8sAPICIDRs = []netip.Prefix{defaultAPIServerCIDR}
		n.K8sAPICIDRSource = "default"
	}
	return nil
}

// serviceHost keeps KUBERNETES_SERVICE_HOST as set. It is validated only
// when resolveAPIServerCIDRs falls back to it: with explicit CIDRs its value
// does not matter.
func serviceHost(p func(*Config) *string) field {
	return field{
		rule:  "IP address, when used",
		blank: isEmpty,
		set:   func(c *Config, s string) error { *p(c) = s; return nil },
	}
}

// ipv4Host is a single IPv4 address written as a /32 CIDR. Anything else —
// a bare address, a wider prefix, IPv6, a list — is refused rather than
// widened into a DNS egress allow.
func ipv4Host(p func(*Config) *netip.Prefix) field {
	return field{
		rule:  "one IPv4 `/32` CIDR",
		blank: isEmpty,
		set: func(c *Config, s string) error {
			prefix, err := netip.ParsePrefix(s)
			if err != nil || !prefix.Addr().Is4() || prefix.Bits() != 32 {
				return fmt.Errorf("%q is not exactly one IPv4 /32 CIDR", s)
			}
			*p(c) = prefix
			return nil
		},
	}
}

// egressDenyCIDRs is a list of networks that external egress may never
// reach. Each entry must be a network written canonically: "10.0.0.1/16"
// could be a typo for a host or for 10.0.0.0/16, and a guess either way
// would open or close the wrong range.
func egressDenyCIDRs(p func(*Config) *[]netip.Prefix) field {
	return field{
		rule:  "comma-separated IPv4 or IPv6 CIDRs without host bits, no duplicates",
		blank: isBlankList,
		set: func(c *Config, s string) error {
			var prefixes []netip.Prefix
			for _, item := range splitList(s) {
				prefix, err := parseDenyCIDR(item)
				if err != nil {
					return err
				}
				if slices.Contains(prefixes, prefix) {
					return fmt.Errorf("entry %q is listed twice", item)
				}
				prefixes = append(prefixes, prefix)
			}
			*p(c) = prefixes
			return nil
		},
	}
}

func parseDenyCIDR(s string) (netip.Prefix, error) {
	prefix, err := netip.ParsePrefix(s)
	switch {
	case err != nil:
		return prefix, fmt.Errorf("entry %q is not a CIDR", s)
	case prefix.Addr().Is4In6():
		// A NetworkPolicy ipBlock never matches IPv4 traffic through its
		// IPv6-mapped form, so such an entry would deny nothing.
		return prefix, fmt.Errorf("entry %q is IPv4-mapped IPv6; write it as IPv4", s)
	case prefix != prefix.Masked():
		return prefix, fmt.Errorf("entry %q has host bits set (the network is %s)", s, prefix.Masked())
	case prefix.Bits() == 0:
		// An except equal to the public-web cidr is invalid in a
		// NetworkPolicy; denying every address means having no external
		// egress, which is the bindings' decision, not this list's.
		return prefix, fmt.Errorf("entry %q covers every address", s)
	}
	return prefix, nil
}
