package netpol

import (
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/netpol"
)

// PlanOptions extracts the planner's options from a loaded configuration.
// It lives here, with the planner's callers, so the planner itself depends
// on no configuration code.
func PlanOptions(cfg *config.Config) netpol.Options {
	return netpol.Options{
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
