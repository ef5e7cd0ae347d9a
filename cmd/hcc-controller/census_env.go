package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// censusVars are the variables the census reads from where the controller
// runs: the orphan caps, and the namespaces that decide which policies are
// planned and which are listed. Every other variable comes from the
// caller's environment (docs/networkpolicy.md, "Census").
var censusVars = []string{
	capVar,
	capPercentVar,
	"CONTEXT_MAPPER_NAMESPACE",
	"CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE",
	"CONTEXT_MAPPER_HOST_NAMESPACE",
	"CONTEXT_MAPPER_GFS_NAMESPACE",
	"CONTEXT_MAPPER_RPC_PROXY_NAMESPACE",
	"CONTEXT_MAPPER_CHANNELS_NAMESPACE",
	"CONTEXT_MAPPER_SANDBOX_NAMESPACE",
	"HCC_TARGET_NAMESPACE",
	"CONTEXT_MAPPER_RUNTIME_NAMESPACES",
	"CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES",
}

// controllerDeployment and controllerContainer are the names deploy/base
// gives the controller's Deployment and its container.
const (
	controllerDeployment = "hcc-controller"
	controllerContainer  = "hcc-controller"
)

// sourced is a variable's value and where it came from. set is false when
// nothing sets it, and the compiled default applies.
type sourced struct {
	value, source string
	set           bool
}

const callerSource = "this process's environment"

// callerEnv returns the census variables as this process's environment
// holds them.
func callerEnv() map[string]sourced {
	out := map[string]sourced{}
	for _, name := range censusVars {
		if v, ok := os.LookupEnv(name); ok {
			out[name] = sourced{value: v, source: callerSource, set: true}
		}
	}
	return out
}

// deploymentEnv resolves the census variables as the container
// controllerContainer of the Deployment namespace/name gets them, in the
// order the kubelet builds a container's environment: every envFrom source
// in turn, a later one overriding an earlier, then env, whose entries
// override envFrom (and a later entry an earlier one). An optional
// ConfigMap or key that is missing sets nothing, as for the kubelet; a
// required one is an error, since the pod could not start either. The
// census reads no Secret, so a census variable from a Secret, from a
// field other than the pod's namespace, or with a $(VAR) reference is an
// error rather than a guess. notes says what was not read.
func deploymentEnv(ctx context.Context, kube kubernetes.Interface, namespace, name string) (env map[string]sourced, notes []string, err error) {
	dep, err := kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("the controller's Deployment %s/%s does not exist (--from-deployment=false reads this process's environment instead)", namespace, name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
	}
	i := slices.IndexFunc(dep.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == controllerContainer })
	if i < 0 {
		return nil, nil, fmt.Errorf("the Deployment %s/%s has no container %s", namespace, name, controllerContainer)
	}
	c := dep.Spec.Template.Spec.Containers[i]

	configMaps := map[string]*corev1.ConfigMap{}
	// configMap returns the named ConfigMap, nil when it does not exist.
	configMap := func(cm string) (*corev1.ConfigMap, error) {
		if got, ok := configMaps[cm]; ok {
			return got, nil
		}
		got, err := kube.CoreV1().ConfigMaps(namespace).Get(ctx, cm, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			got, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, cm, err)
		}
		configMaps[cm] = got
		return got, nil
	}
	wanted := func(v string) bool { return slices.Contains(censusVars, v) }
	env = map[string]sourced{}

	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			ref := from.ConfigMapRef
			cm, err := configMap(ref.Name)
			if err != nil {
				return nil, nil, err
			}
			if cm == nil {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, nil, fmt.Errorf("envFrom ConfigMap %s/%s does not exist", namespace, ref.Name)
			}
			for key, v := range cm.Data {
				if wanted(from.Prefix + key) {
					env[from.Prefix+key] = sourced{value: v, source: fmt.Sprintf("envFrom ConfigMap %s", ref.Name), set: true}
				}
			}
		case from.SecretRef != nil:
			notes = append(notes, fmt.Sprintf("envFrom Secret %s not read: a census variable it sets is not seen", from.SecretRef.Name))
		}
	}

	for _, e := range c.Env {
		if !wanted(e.Name) {
			continue
		}
		at := fmt.Sprintf("Deployment %s/%s: %s", namespace, name, e.Name)
		switch from := e.ValueFrom; {
		case from == nil:
			if strings.Contains(e.Value, "$(") {
				return nil, nil, fmt.Errorf("%s: a $(VAR) reference, which the census does not expand", at)
			}
			env[e.Name] = sourced{value: e.Value, source: "env value", set: true}
		case from.ConfigMapKeyRef != nil:
			ref := from.ConfigMapKeyRef
			optional := ref.Optional != nil && *ref.Optional
			cm, err := configMap(ref.Name)
			if err != nil {
				return nil, nil, err
			}
			v, ok := "", false
			if cm != nil {
				v, ok = cm.Data[ref.Key]
			}
			switch {
			case ok:
				env[e.Name] = sourced{value: v, source: fmt.Sprintf("env from ConfigMap %s key %s", ref.Name, ref.Key), set: true}
			case !optional:
				return nil, nil, fmt.Errorf("%s: ConfigMap %s/%s has no key %s", at, namespace, ref.Name, ref.Key)
			}
		case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = sourced{value: namespace, source: "env from the pod's namespace", set: true}
		default:
			return nil, nil, fmt.Errorf("%s: set from a Secret or a pod field, which the census does not read", at)
		}
	}
	return env, notes, nil
}

// withCensusVars returns a lookup that answers the census variables from
// env alone (unset ones take the compiled default, as in the controller)
// and every other variable from this process's environment.
func withCensusVars(env map[string]sourced) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if slices.Contains(censusVars, name) {
			v := env[name]
			return v.value, v.set
		}
		return os.LookupEnv(name)
	}
}

// sourceOf says where a census variable's value came from: an empty value
// means the default, as the configuration reads it.
func sourceOf(env map[string]sourced, name string) string {
	v := env[name]
	switch {
	case !v.set:
		return "compiled default"
	case v.value == "":
		return "compiled default (" + v.source + " is empty)"
	}
	return v.source
}
