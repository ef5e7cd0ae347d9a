package netpol

import (
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/clerum/hcc/pkg/names"
)

// recipeBinding lets McpServer From reach the sandbox pods labelled app: To on
// Port/Protocol for recipe Recipe.
type recipeBinding struct {
	Recipe   string          `json:"recipe"`
	From     string          `json:"from"`
	To       string          `json:"to"`
	Port     int64           `json:"port"`
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// recipeBindingKey is the Rejection.Binding of a recipe's entries; a
// malformed annotation, whose recipes are unknown, is reported under "*".
func recipeBindingKey(recipe string) string { return "recipe:" + recipe }

// parseRecipeBindings returns the valid entries of server's annotation value,
// sorted and without duplicates, and a rejection for every invalid one.
func parseRecipeBindings(server, annotation string) ([]recipeBinding, []Rejection) {
	var entries []recipeBinding
	if err := json.Unmarshal([]byte(annotation), &entries); err != nil {
		return nil, []Rejection{{
			Kind:    RejectedRecipeBinding,
			Server:  server,
			Binding: recipeBindingKey("*"),
			Reason:  fmt.Sprintf("annotation %s is not a JSON list of {recipe, from, to, port, protocol}: %v", names.AnnotationRecipeBindings, err),
		}}
	}

	var rejections []Rejection
	valid := entries[:0]
	for _, e := range entries {
		if e.Protocol == "" {
			e.Protocol = corev1.ProtocolTCP
		}
		if err := validateRecipeBinding(server, e); err != nil {
			rejections = append(rejections, Rejection{Kind: RejectedRecipeBinding, Server: server, Binding: recipeBindingKey(e.Recipe), Reason: err.Error()})
			continue
		}
		valid = append(valid, e)
	}
	slices.SortFunc(valid, compareRecipeBindings)
	return slices.Compact(valid), rejections
}

func validateRecipeBinding(server string, e recipeBinding) error {
	switch {
	case len(validation.IsDNS1123Label(e.Recipe)) > 0:
		return fmt.Errorf("recipe %q is not a DNS label", e.Recipe)
	case e.From != server:
		return fmt.Errorf("from %q is not this McpServer (%s)", e.From, server)
	case len(validation.IsDNS1123Label(e.To)) > 0:
		return fmt.Errorf("to %q is not a DNS label", e.To)
	case e.Port < 1 || e.Port > 65535:
		return fmt.Errorf("port %d is outside 1-65535", e.Port)
	case e.Protocol != corev1.ProtocolTCP && e.Protocol != corev1.ProtocolUDP:
		return fmt.Errorf("protocol %q is neither TCP nor UDP", e.Protocol)
	}
	return nil
}

func compareRecipeBindings(a, b recipeBinding) int {
	return cmp.Or(
		cmp.Compare(a.Recipe, b.Recipe),
		cmp.Compare(a.To, b.To),
		cmp.Compare(a.Protocol, b.Protocol),
		cmp.Compare(a.Port, b.Port),
	)
}

// recipePairs yields sorted, distinct bindings grouped by recipe and
// workload. Both halves of a pair are named by (recipe, from, to), so entries
// for one pair on several ports become one pair of policies listing them all.
func recipePairs(bindings []recipeBinding) iter.Seq[[]recipeBinding] {
	return func(yield func([]recipeBinding) bool) {
		for rest := bindings; len(rest) > 0; {
			n := 1
			for n < len(rest) && rest[n].Recipe == rest[0].Recipe && rest[n].To == rest[0].To {
				n++
			}
			if !yield(rest[:n]) {
				return
			}
			rest = rest[n:]
		}
	}
}

func recipePorts(group []recipeBinding) []networkingv1.NetworkPolicyPort {
	ports := make([]networkingv1.NetworkPolicyPort, len(group))
	for i, e := range group {
		ports[i] = port(e.Protocol, int32(e.Port))
	}
	return ports
}

// recipeOwner is the owner labels of both halves of a recipe binding.
func recipeOwner(b recipeBinding) []string {
	return []string{names.LabelMcpServer, b.From, names.LabelRecipe, b.Recipe}
}

// buildRecipeEgress is the half in the MCP server namespace: the server may
// reach the recipe workload. pair is one group of recipePairs.
func buildRecipeEgress(pair []recipeBinding, opts Options) *networkingv1.NetworkPolicy {
	b := pair[0]
	p := newPolicy(opts.McpServerNamespace, names.RecipeBindingEgressPolicy(b.Recipe, b.From, b.To), names.PolicyTypeRecipeBinding, recipeOwner(b),
		matchLabels(names.LabelMcpServer, b.From), networkingv1.PolicyTypeEgress)
	p.Spec.Egress = egressTo(recipePorts(pair), podsInNamespace(opts.SandboxNamespace, matchLabels(names.LabelApp, b.To)))
	return p
}

// buildRecipeIngress is the half in the sandbox namespace: the recipe
// workload admits the server.
func buildRecipeIngress(pair []recipeBinding, opts Options) *networkingv1.NetworkPolicy {
	b := pair[0]
	p := newPolicy(opts.SandboxNamespace, names.RecipeBindingIngressPolicy(b.Recipe, b.From, b.To), names.PolicyTypeRecipeBinding, recipeOwner(b),
		matchLabels(names.LabelApp, b.To), networkingv1.PolicyTypeIngress)
	p.Spec.Ingress = ingressFrom(recipePorts(pair), podsInNamespace(opts.McpServerNamespace, matchLabels(names.LabelMcpServer, b.From)))
	return p
}
