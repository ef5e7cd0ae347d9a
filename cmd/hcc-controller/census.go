package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/pkg/config"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
	"github.com/clerum/hcc/pkg/controllers/netpol/planopts"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// Variables whose source the census reports.
const (
	capVar        = "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP"
	capPercentVar = "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP_PERCENT"
)

// runCensus is `hcc-controller census [--kubeconfig PATH]
// [--from-deployment[=false]] [--deployment NAMESPACE/NAME]`: a read-only
// look at the managed NetworkPolicies of a live cluster, the orphans a full
// pass would find and whether the delete caps would trip. The caps and the
// namespaces are the live controller's: read from its Deployment, unless
// --from-deployment=false takes them from this process's environment. The
// default is on when a kubeconfig is given or the census runs as the
// kubectl plugin (the caller is outside the cluster) and off in-cluster,
// where this environment is the pod's.
func runCensus(ctx context.Context, cmd command, args []string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %s\n", cmd.name, strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	var fromDeployment bool
	var deployment string
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cluster := cmd.clusterFlags(fs)
	fs.BoolVar(&fromDeployment, "from-deployment", false, "read the caps and namespaces from the controller's Deployment (default true when a kubeconfig is given, and in kubectl hcc)")
	fs.StringVar(&deployment, "deployment", "", "the controller's Deployment as NAMESPACE/NAME (default: the control-plane namespace/"+controllerDeployment+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return fail(err)
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "from-deployment" })
	if !explicit {
		fromDeployment = cmd.plugin || cluster.kubeconfig != "" || os.Getenv("KUBECONFIG") != ""
	}
	// The census writes nothing, so it needs none of the live controller's
	// secrets: it loads the configuration as render does.
	cfg, err := config.Load(config.Render)
	if err != nil {
		return fail(fmt.Errorf("invalid configuration: %w", err))
	}
	// The plan's enforce-mode refusal comes from the allowlist: a list the
	// controller would refuse at startup is refused here too.
	if _, err := imagepolicy.Parse(cfg.ImagePolicy.AllowedPrefixes); err != nil {
		return fail(fmt.Errorf("CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES: %w", err))
	}
	restCfg, err := cmd.connect(ctx, cluster, cfg.Core)
	if err != nil {
		return fail(err)
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fail(err)
	}
	hcc, err := clientset.NewForConfig(restCfg)
	if err != nil {
		return fail(err)
	}

	env, from := callerEnv(), callerSource
	if fromDeployment {
		namespace, name := cfg.Namespaces.ControlPlane, controllerDeployment
		if deployment != "" {
			var ok bool
			if namespace, name, ok = strings.Cut(deployment, "/"); !ok || namespace == "" || name == "" {
				return fail(fmt.Errorf("--deployment %q is not NAMESPACE/NAME", deployment))
			}
		}
		var notes []string
		if env, notes, err = deploymentEnv(ctx, kube, namespace, name); err != nil {
			return fail(err)
		}
		for _, n := range notes {
			fmt.Fprintf(stderr, "warning: %s\n", n)
		}
		if cfg, err = config.LoadFrom(config.Render, withCensusVars(env)); err != nil {
			return fail(fmt.Errorf("invalid configuration (caps and namespaces of Deployment %s/%s): %w", namespace, name, err))
		}
		from = fmt.Sprintf("Deployment %s/%s, container %s", namespace, name, controllerContainer)
	}

	opts := planopts.FromConfig(cfg)
	live, inv, err := readCluster(ctx, kube, hcc, opts)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "caps and namespaces from %s:\n", from)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, name := range censusVars {
		value := "(unset)"
		if v := env[name]; v.set {
			value = strconv.Quote(v.value)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, value, sourceOf(env, name))
	}
	if err := tw.Flush(); err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout)
	caps := netpolcontroller.Caps{Absolute: cfg.NetPol.OrphanDeleteCap, Percent: cfg.NetPol.OrphanDeleteCapPercent}
	census := netpolcontroller.TakeCensus(live, inv, opts, caps)
	if err := census.Write(stdout, capSource(env, capVar), capSource(env, capPercentVar)); err != nil {
		return fail(err)
	}
	return 0
}

// readCluster lists the managed policies and the planner's inventory.
func readCluster(ctx context.Context, kube kubernetes.Interface, hcc clientset.Interface, opts netpol.Options) ([]*networkingv1.NetworkPolicy, netpol.Inventory, error) {
	var live []*networkingv1.NetworkPolicy
	selector := metav1.ListOptions{LabelSelector: names.LabelManagedBy + "=" + names.ManagedByValue}
	for _, ns := range netpolcontroller.PolicyNamespaces(opts) {
		list, err := kube.NetworkingV1().NetworkPolicies(ns).List(ctx, selector)
		if err != nil {
			return nil, netpol.Inventory{}, fmt.Errorf("listing NetworkPolicies in %s: %w", ns, err)
		}
		for i := range list.Items {
			live = append(live, &list.Items[i])
		}
	}
	// A runtime namespace's deny-all name may be held by a policy HCC does
	// not manage; the census says whether it counts as the default deny.
	for _, ns := range opts.RuntimeNamespaces {
		p, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, names.DenyAllPolicy(ns), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, netpol.Inventory{}, fmt.Errorf("reading NetworkPolicy %s/%s: %w", ns, names.DenyAllPolicy(ns), err)
		case p.Labels[names.LabelManagedBy] != names.ManagedByValue:
			live = append(live, p)
		}
	}
	var inv netpol.Inventory
	servers, err := hcc.ClerumV1alpha1().McpServers(opts.McpServerNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, inv, fmt.Errorf("listing McpServers: %w", err)
	}
	for i := range servers.Items {
		inv.Servers = append(inv.Servers, &servers.Items[i])
	}
	contexts, err := hcc.ClerumV1alpha1().Contexts(opts.McpServerNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, inv, fmt.Errorf("listing Contexts: %w", err)
	}
	for i := range contexts.Items {
		inv.Contexts = append(inv.Contexts, &contexts.Items[i])
	}
	return live, inv, nil
}

// capSource says whether a cap came from where the census read it or the
// compiled default.
func capSource(env map[string]sourced, name string) string {
	switch src := sourceOf(env, name); {
	case strings.HasPrefix(src, "compiled default"):
		return "compiled default"
	case src == callerSource:
		return "from " + name
	default:
		return "from " + name + ", " + src
	}
}
