package controlplane

import (
	"fmt"
	"os"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// ShippedEnv returns the literal env entries (NAME=value) of the first
// container of the Deployment manifest at path: the configuration a binary
// ships with (deploy/base). Entries read from Secrets or ConfigMaps are
// left to the caller. make run, the end-to-end tests and the benchmarks run
// hcc-controller and hcc-api with it.
func ShippedEnv(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return nil, fmt.Errorf("%s: no container", path)
	}
	var env []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env, nil
}

// hccEnvPrefixes are the prefixes of the variables HCC's binaries read.
var hccEnvPrefixes = []string{"HCC_", "CONTEXT_MAPPER_", "CONTROL_API_", "MCP_HOST_", "INTERNAL_CONTROL_", "CLERUM_"}

// BinaryEnv is this process's environment without KUBECONFIG (a started
// binary gets --kubeconfig) and without any variable HCC reads, so that a
// setting of the caller's shell never leaks into a binary: the base a
// started binary's own configuration is appended to.
func BinaryEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "KUBECONFIG" || slices.ContainsFunc(hccEnvPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// FreePorts returns n distinct loopback ports that were free a moment ago.
func FreePorts(n int) ([]int, error) { return freePorts(n) }
