package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
)

const (
	// convergeTimeout is how long make run waits before it prints what
	// exists and names what is still pending.
	convergeTimeout = 5 * time.Minute
	// tokenRefresh is how often a fresh inventory command is printed: the
	// access tokens live devcontrolapi.DefaultAccessTokenTTL (5 minutes).
	tokenRefresh = 4 * time.Minute
)

// watcher reads what HCC created, as the cluster admin.
type watcher struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
	// needServers: converged needs at least one McpServer (the examples
	// were applied).
	needServers bool
}

// waitConverged waits until every McpServer, Host and file system says
// ready and every Deployment HCC wrote is available, printing what it
// waits for every 10 s. After convergeTimeout it returns what is still
// pending.
func (w *watcher) waitConverged(ctx context.Context) []string {
	progress("waiting for HCC to converge")
	deadline := time.Now().Add(convergeTimeout)
	lastReport := time.Now()
	for {
		pending := w.pending(ctx)
		if len(pending) == 0 {
			progress("converged: every server, Host and file system is ready")
			return nil
		}
		if time.Now().After(deadline) {
			progress("not converged after %s", convergeTimeout)
			return pending
		}
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			shown := pending
			if len(shown) > 4 {
				shown = append(slices.Clone(shown[:4]), fmt.Sprintf("%d more", len(pending)-4))
			}
			progress("waiting for: %s", strings.Join(shown, "; "))
		}
		select {
		case <-ctx.Done():
			return pending
		case <-time.After(time.Second):
		}
	}
}

// pending names each object that is not ready yet, with why.
func (w *watcher) pending(ctx context.Context) []string {
	var out []string
	servers, err := w.hcc.ClerumV1alpha1().McpServers(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing McpServers: " + err.Error()}
	}
	if len(servers.Items) == 0 && w.needServers {
		out = append(out, "no McpServer yet")
	}
	for _, s := range servers.Items {
		if s.Spec.Enabled != nil && !*s.Spec.Enabled {
			continue
		}
		if s.Status.ObservedGeneration != s.Generation || !s.Status.Ready {
			out = append(out, "McpServer "+s.Name+" ("+reason(s.Status.Conditions)+")")
		}
	}
	hosts, err := w.hcc.ClerumV1alpha1().Hosts(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, "listing Hosts: "+err.Error())
	}
	for _, h := range hosts.Items {
		if h.Status.ObservedGeneration != h.Generation || !meta.IsStatusConditionTrue(h.Status.Conditions, clerumv1alpha1.ConditionReady) {
			out = append(out, "Host "+h.Name+" ("+reason(h.Status.Conditions)+")")
		}
	}
	sfs, err := w.hcc.ClerumV1alpha1().SharedFileSystems(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, "listing SharedFileSystems: "+err.Error())
	}
	for _, f := range sfs.Items {
		if f.Status.ObservedGeneration != f.Generation || f.Status.Phase != clerumv1alpha1.FileSystemReady {
			out = append(out, "SharedFileSystem "+f.Name+" ("+reason(f.Status.Conditions)+")")
		}
	}
	gfs, err := w.hcc.ClerumV1alpha1().GlobalFileSystems(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, "listing GlobalFileSystems: "+err.Error())
	}
	for _, f := range gfs.Items {
		if f.Status.ObservedGeneration != f.Generation || f.Status.Phase != clerumv1alpha1.FileSystemReady {
			out = append(out, "GlobalFileSystem "+f.Name+" ("+reason(f.Status.Conditions)+")")
		}
	}
	deps, err := w.kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, managed())
	if err != nil {
		return append(out, "listing Deployments: "+err.Error())
	}
	for _, d := range deps.Items {
		if !kit.DeploymentAvailable(&d) && (d.Spec.Replicas == nil || *d.Spec.Replicas > 0) {
			out = append(out, fmt.Sprintf("Deployment %s/%s (%d/%d available)", d.Namespace, d.Name, d.Status.AvailableReplicas, replicas(d.Spec.Replicas)))
		}
	}
	return out
}

// reason is the Ready condition's reason, or that status has none yet.
func reason(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, clerumv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return "no status yet"
}

func managed() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: names.LabelManagedBy + "=" + names.ManagedByValue}
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// summary is where everything make run started serves, and what the wait
// for convergence left pending.
type summary struct {
	kubeconfig   string // the admin kubeconfig (HCC_KUBECONFIG's, on a cluster of yours)
	api          string // hcc-api's URL
	desktopToken string // guards hcc-api's desktop route
	controller   string // hcc-controller's URL
	controlAPI   string // the development Control API's URL
	logs         string // the folder of the binaries' logs
	pending      []string
}

// printReport prints, on stdout, where everything is, a kubectl line for
// the cluster, the table of printTable and what is still pending. The
// README and docs/make-run.md show what it prints, and report_test.go
// keeps them equal.
func (w *watcher) printReport(ctx context.Context, out io.Writer, s summary) error {
	fmt.Fprintln(out)
	fmt.Fprintf(out, "kubeconfig:     %s\n", s.kubeconfig)
	fmt.Fprintf(out, "hcc-api:        %s (desktop API token %s)\n", s.api, s.desktopToken)
	fmt.Fprintf(out, "hcc-controller: %s/health, /ready, /metrics\n", s.controller)
	fmt.Fprintf(out, "Control API (development): %s\n", s.controlAPI)
	fmt.Fprintf(out, "logs:           %s\n", s.logs)
	fmt.Fprintf(out, "try:            kubectl --kubeconfig %s get mcps,ctx,hosts,sfs,gfs -A\n\n", s.kubeconfig)
	if err := w.printTable(ctx, out); err != nil {
		return err
	}
	for _, p := range s.pending {
		fmt.Fprintf(out, "still pending: %s\n", p)
	}
	return nil
}

// printTable prints the clerum.io objects and every object HCC created,
// with their readiness.
func (w *watcher) printTable(ctx context.Context, out io.Writer) error {
	type row struct{ kind, namespace, name, ready string }
	var rows []row
	add := func(kind, ns, name, ready string) { rows = append(rows, row{kind, ns, name, ready}) }
	all, opts := metav1.NamespaceAll, managed()

	servers, err := w.hcc.ClerumV1alpha1().McpServers(all).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range servers.Items {
		add("McpServer", s.Namespace, s.Name, fmt.Sprintf("ready=%t (%s)", s.Status.Ready, reason(s.Status.Conditions)))
	}
	hosts, err := w.hcc.ClerumV1alpha1().Hosts(all).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, h := range hosts.Items {
		add("Host", h.Namespace, h.Name, fmt.Sprintf("ready=%t (%s)", meta.IsStatusConditionTrue(h.Status.Conditions, clerumv1alpha1.ConditionReady), reason(h.Status.Conditions)))
	}
	sfs, err := w.hcc.ClerumV1alpha1().SharedFileSystems(all).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, f := range sfs.Items {
		add("SharedFileSystem", f.Namespace, f.Name, "phase="+string(f.Status.Phase))
	}
	gfs, err := w.hcc.ClerumV1alpha1().GlobalFileSystems(all).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, f := range gfs.Items {
		add("GlobalFileSystem", f.Namespace, f.Name, fmt.Sprintf("phase=%s rootSeeded=%t", f.Status.Phase, f.Status.RootSeeded))
	}

	deps, err := w.kube.AppsV1().Deployments(all).List(ctx, opts)
	if err != nil {
		return err
	}
	for _, d := range deps.Items {
		add("Deployment", d.Namespace, d.Name, fmt.Sprintf("%d/%d available", d.Status.AvailableReplicas, replicas(d.Spec.Replicas)))
	}
	jobs, err := w.kube.BatchV1().Jobs(all).List(ctx, opts)
	if err != nil {
		return err
	}
	for _, j := range jobs.Items {
		add("Job", j.Namespace, j.Name, fmt.Sprintf("%d succeeded", j.Status.Succeeded))
	}
	claims, err := w.kube.CoreV1().PersistentVolumeClaims(all).List(ctx, opts)
	if err != nil {
		return err
	}
	for _, c := range claims.Items {
		add("PersistentVolumeClaim", c.Namespace, c.Name, string(c.Status.Phase))
	}
	for _, list := range []struct {
		kind string
		list func() (runtime.Object, error)
	}{
		{"Service", func() (runtime.Object, error) { return w.kube.CoreV1().Services(all).List(ctx, opts) }},
		{"ConfigMap", func() (runtime.Object, error) { return w.kube.CoreV1().ConfigMaps(all).List(ctx, opts) }},
		{"Secret", func() (runtime.Object, error) { return w.kube.CoreV1().Secrets(all).List(ctx, opts) }},
		{"ServiceAccount", func() (runtime.Object, error) { return w.kube.CoreV1().ServiceAccounts(all).List(ctx, opts) }},
		{"Role", func() (runtime.Object, error) { return w.kube.RbacV1().Roles(all).List(ctx, opts) }},
		{"RoleBinding", func() (runtime.Object, error) { return w.kube.RbacV1().RoleBindings(all).List(ctx, opts) }},
		{"NetworkPolicy", func() (runtime.Object, error) { return w.kube.NetworkingV1().NetworkPolicies(all).List(ctx, opts) }},
	} {
		l, err := list.list()
		if err != nil {
			return err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return err
		}
		for _, item := range items {
			m, err := meta.Accessor(item)
			if err != nil {
				return err
			}
			add(list.kind, m.GetNamespace(), m.GetName(), "-")
		}
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tREADINESS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.kind, r.namespace, r.name, r.ready)
	}
	return tw.Flush()
}

// printInventoryCommand exchanges the first ready Host's bootstrap
// credential for an access token at the development Control API, checks
// that hcc-api accepts it, and prints the curl line that calls the v2
// inventory with it; then a fresh one every tokenRefresh, until ctx ends.
func (r *runner) printInventoryCommand(ctx context.Context, w *watcher, devURL, apiURL string) error {
	host, err := w.readyHost(ctx)
	if err != nil {
		return err
	}
	if host == nil {
		fmt.Println("\nno Host is ready, so there is no access token to show; make run keeps running until Ctrl-C")
		<-ctx.Done()
		return nil
	}
	for failures := 0; ; {
		next := tokenRefresh
		if err := w.printOne(ctx, devURL, apiURL, host); err != nil {
			// A Host being rolled or hcc-api restarting is no reason to
			// stop the cluster: try again, shortly at first.
			failures++
			if failures <= 3 {
				next = 5 * time.Second
			}
			progress("could not make a fresh inventory command (retrying in %s): %v", next, err)
			if failures == 3 {
				progress("only a credential this run's development Control API issued exchanges here; " +
					"one from another Control API (an earlier run, the platform's) does not until the controller replaces it")
			}
		} else {
			failures = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// printOne exchanges host's credential and prints one inventory command.
func (w *watcher) printOne(ctx context.Context, devURL, apiURL string, host *clerumv1alpha1.Host) error {
	token, expires, err := w.accessToken(ctx, devURL, host)
	if err != nil {
		return err
	}
	status, count, err := inventory(ctx, apiURL, token)
	if err != nil {
		return err
	}
	writeInventoryCommand(os.Stdout, inventoryCommand{
		host:    host.Namespace + "/" + host.Name,
		servers: count,
		status:  status,
		expires: expires.Local(),
		token:   token,
		apiURL:  apiURL,
	})
	return nil
}

// inventoryCommand is one v2 inventory call that worked, to be printed.
type inventoryCommand struct {
	host            string // namespace/name
	servers, status int    // what the call returned
	expires         time.Time
	token, apiURL   string
}

// writeInventoryCommand prints c as the curl line that repeats it. The
// README and docs/make-run.md show what it prints (report_test.go).
func writeInventoryCommand(out io.Writer, c inventoryCommand) {
	fmt.Fprintf(out, "\nThe v2 inventory of Host %s (%d servers, HTTP %d), with an access token valid until %s:\n",
		c.host, c.servers, c.status, c.expires.Format(time.TimeOnly))
	fmt.Fprintf(out, "curl -sS -H 'Authorization: Bearer %s' %s/api/v2/hosts/self/mcpservers\n", c.token, c.apiURL)
	fmt.Fprintf(out, "(a fresh command follows every %s; Ctrl-C stops everything)\n", tokenRefresh)
}

// readyHost returns the first Host, by namespace and name, whose Ready
// condition is true; nil if there is none.
func (w *watcher) readyHost(ctx context.Context) (*clerumv1alpha1.Host, error) {
	hosts, err := w.hcc.ClerumV1alpha1().Hosts(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(hosts.Items, func(a, b clerumv1alpha1.Host) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for i := range hosts.Items {
		if meta.IsStatusConditionTrue(hosts.Items[i].Status.Conditions, clerumv1alpha1.ConditionReady) {
			return &hosts.Items[i], nil
		}
	}
	return nil, nil
}

// accessToken does what mcp-host does (docs/control-api.md): read the
// bootstrap credential from the Host's runtime-token Secret and exchange
// it for an access token.
func (w *watcher) accessToken(ctx context.Context, devURL string, host *clerumv1alpha1.Host) (string, time.Time, error) {
	secret, err := w.kube.CoreV1().Secrets(host.Namespace).Get(ctx, names.HostRuntimeTokens(host.Name), metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	credential := string(secret.Data["bootstrap-credential"])
	body, err := json.Marshal(map[string]string{"credential": credential})
	if err != nil {
		return "", time.Time{}, err
	}
	var out struct {
		AccessToken string `json:"accessToken"`
		ExpiresAt   string `json:"expiresAt"`
	}
	if err := postJSON(ctx, devURL+"/api/v1/mcp-host/token", body, &out); err != nil {
		return "", time.Time{}, fmt.Errorf("exchanging Host %s's credential: %w", host.Name, err)
	}
	expires, err := time.Parse(time.RFC3339, out.ExpiresAt)
	return out.AccessToken, expires, err
}

// inventory calls the v2 inventory with token and returns the status code
// and how many servers it lists.
func inventory(ctx context.Context, apiURL, token string) (int, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/api/v2/hosts/self/mcpservers", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var inv struct {
		Servers []json.RawMessage `json:"servers"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&inv); err != nil {
			return resp.StatusCode, 0, err
		}
	}
	return resp.StatusCode, len(inv.Servers), nil
}

func postJSON(ctx context.Context, url string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
