// Package planopts turns a loaded configuration into the NetworkPolicy
// planner's options. It is apart from pkg/netpol, so the planner itself
// depends on no configuration code, and apart from the applier in
// pkg/controllers/netpol, so `hcc-controller render` and census can use it
// without linking informers or clientsets.
package planopts

import (
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/netpol"
)

// FromConfig extracts the planner's options from a loaded configuration.
//
// In enforce mode ImageRefused is the allowlist's refusal (one function,
// imagepolicy.Enforced, shared with the McpServer operator and hcc-api): a
// refused server's Context allows are not planned. hcc-controller (run,
// render and census) and hcc-api parse the allowlist at startup and exit
// on a bad one before anything plans; should a list fail to parse here all
// the same, the nil Policy refuses every image, which fails closed.
func FromConfig(cfg *config.Config) netpol.Options {
	images, _ := imagepolicy.Parse(cfg.ImagePolicy.AllowedPrefixes)
	return netpol.Options{
		ImageRefused:           imagepolicy.Enforced(images, cfg.ImagePolicy.Enforce),
		McpServerNamespace:     cfg.Namespaces.McpServer,
		HostNamespace:          cfg.Namespaces.Host,
		RPCProxyNamespace:      cfg.Namespaces.RPCProxy,
		ControlPlaneNamespace:  cfg.Namespaces.ControlPlane,
		SandboxNamespace:       cfg.Namespaces.Sandbox,
		RuntimeNamespaces:      cfg.NetPol.RuntimeNamespaces,
		MinimalInfraNamespaces: cfg.NetPol.MinimalInfraNamespaces,
		K8sAPICIDRs:            cfg.NetPol.K8sAPICIDRs,
		NodeLocalDNSCIDR:       cfg.NetPol.NodeLocalDNSCIDR,
		APIPort:                cfg.Core.Port,
		ClusterDomain:          cfg.Core.ClusterDomain,
		EgressDenyCIDRs:        cfg.NetPol.EgressDenyCIDRs,
	}
}
