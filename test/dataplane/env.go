package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/hack/devcontrolapi"
	"github.com/clerum/hcc/internal/testing/controlplane"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// The environment of one run, inside the node: the local cluster, with
// kube-router, the agent, a DNS server pod, the outside world and
// hcc-controller.

// Environment variables the preparing process (Prepare) hands to the node.
const (
	// hccBinEnv is the directory holding hcc-controller.
	hccBinEnv = "HCC_DATAPLANE_HCC_BIN"
)

// Namespaces of the platform, as the shipped configuration names them.
var platformNamespaces = []string{"control-plane", "mcp-server", "mcp-host", "rpc-proxy", "sandbox-recipes", "sandbox-ui", "channels", "gfs"}

// controllerUser is hcc-controller's ServiceAccount (deploy/base), which
// the controller impersonates so that the shipped RBAC is what it has.
const controllerUser = "system:serviceaccount:control-plane:hcc-controller"

// dnsPod is the DNS server pod HCC's L1 policies let every pod reach.
var dnsPod = types.NamespacedName{Namespace: "kube-system", Name: "hcc-dataplane-dns"}

// Options configures Start.
type Options struct {
	// Logf receives progress lines.
	Logf func(format string, args ...any)
	// Resolve are the DNS server's answers (hostnames to addresses).
	Resolve map[string][]netip.Addr
	// ControllerEnv are hcc-controller variables (NAME=value) set over the
	// dataplane's defaults.
	ControllerEnv []string
	// LogDir keeps every process's log; default a temporary directory,
	// removed by Close.
	LogDir string
}

// Environment is a running dataplane with its cluster and controller.
type Environment struct {
	opts     Options
	root     string // the repository
	stateDir string
	keepLogs bool

	cp   *controlplane.ControlPlane
	Kube kubernetes.Interface
	HCC  clientset.Interface

	kubeRouter *kubeRouter
	agent      *agent
	stopAgent  context.CancelFunc
	agentDone  chan error

	outsideMu sync.Mutex
	outside   *nsProcess
	// outsidePorts are the ports the outside namespace answers on.
	outsidePorts []Port

	dns *wiredPod

	controlAPI *httptest.Server
	controller *controlplane.Process
	// ControllerURL is hcc-controller's health and metrics endpoint.
	ControllerURL string
}

// Start brings the dataplane up. It must run in the node (InNode), with
// the binaries Prepare built named by its environment.
func Start(ctx context.Context, opts Options) (_ *Environment, err error) {
	if !InNode() {
		return nil, errors.New("dataplane.Start runs only in the node's namespace (RunInNode)")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	stateDir, err := os.MkdirTemp("", "hcc-dataplane-")
	if err != nil {
		return nil, err
	}
	e := &Environment{opts: opts, root: root, stateDir: stateDir}
	if opts.LogDir == "" {
		opts.LogDir = stateDir
	} else {
		e.keepLogs = true
		if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
			return nil, err
		}
	}
	e.opts = opts
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	start := time.Now()
	if err := setUpNode(); err != nil {
		return e, fmt.Errorf("setting up the node: %w", err)
	}
	e.cp, err = controlplane.New(controlplane.Options{
		Cluster:       true,
		NodeIP:        NodeIP.String(),
		APIServerPort: 443,
		Logf:          opts.Logf,
	})
	if err != nil {
		return e, fmt.Errorf("starting the cluster: %w", err)
	}
	e.Kube = kubernetes.NewForConfigOrDie(e.cp.Config())
	e.HCC = clientset.NewForConfigOrDie(e.cp.Config())
	if err := e.setUpPlatform(ctx); err != nil {
		return e, err
	}
	if err := e.createStaticNode(ctx); err != nil {
		return e, err
	}
	binDir := os.Getenv("HCC_CONTROLPLANE_BIN")
	e.kubeRouter, err = startKubeRouter(ctx, binDir, e.cp.Kubeconfig(), filepath.Join(opts.LogDir, "kube-router.log"), e.Kube)
	if err != nil {
		return e, fmt.Errorf("starting kube-router: %w", err)
	}
	opts.Logf("dataplane: kube-router programs the node")
	e.startAgent()
	if err := e.startDNS(ctx); err != nil {
		return e, err
	}
	if err := e.startController(ctx); err != nil {
		return e, err
	}
	opts.Logf("dataplane: up in %s (node %s, DNS server %s)", time.Since(start).Round(time.Millisecond), NodeIP, e.dns.ip)
	return e, nil
}

// setUpPlatform installs what deploy/base ships besides the binaries:
// hcc-controller's ServiceAccount and RBAC, the Host pods' configuration,
// and the static NetworkPolicies of mcp-host and of HCC's own pods. The
// API server's address in mcp-host's policies is a placeholder every
// overlay replaces (apiServerCIDR); here it is the node's.
func (e *Environment) setUpPlatform(ctx context.Context) error {
	if err := controlplane.CreateNamespaces(ctx, e.cp.Config(), platformNamespaces); err != nil {
		return err
	}
	base := filepath.Join(e.root, "deploy", "base")
	raw, err := os.ReadFile(filepath.Join(base, "mcp-host", "networkpolicies.yaml"))
	if err != nil {
		return err
	}
	const placeholder = "192.0.2.1/32"
	if !bytes.Contains(raw, []byte(placeholder)) {
		return fmt.Errorf("deploy/base/mcp-host/networkpolicies.yaml no longer holds the API server placeholder %s", placeholder)
	}
	mcpHostPolicies := filepath.Join(e.stateDir, "mcp-host-networkpolicies.yaml")
	if err := os.WriteFile(mcpHostPolicies, bytes.ReplaceAll(raw, []byte(placeholder), []byte(NodeIP.String()+"/32")), 0o644); err != nil {
		return err
	}
	return controlplane.ApplyFiles(ctx, e.cp.Config(),
		filepath.Join(base, "controller", "serviceaccount.yaml"),
		filepath.Join(base, "controller", "rbac.yaml"),
		filepath.Join(base, "controller", "networkpolicy.yaml"),
		filepath.Join(base, "api", "networkpolicy.yaml"),
		filepath.Join(base, "mcp-host", "configmap.yaml"),
		mcpHostPolicies)
}

func (e *Environment) startAgent() {
	e.agent = newAgent(e.Kube, e.stateDir, e.opts.LogDir, e.opts.Logf, func(ctx context.Context) error {
		_, err := e.kubeRouter.sync(ctx, time.Minute)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	e.stopAgent = cancel
	e.agentDone = make(chan error, 1)
	go func() { e.agentDone <- e.agent.run(ctx) }()
}

// startDNS runs the cluster's DNS server: a pod in kube-system labelled
// k8s-app: kube-dns (the peer of HCC's allow-dns-egress policies) whose
// process answers opts.Resolve on UDP port 53.
func (e *Environment) startDNS(ctx context.Context) error {
	pod := barePod(dnsPod.Namespace, dnsPod.Name, map[string]string{"k8s-app": "kube-dns"},
		[]Port{{Port: 53, Protocol: corev1.ProtocolUDP}, {Port: 53, Protocol: corev1.ProtocolTCP}})
	created, err := e.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the DNS server pod: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if e.dns, err = e.agent.waitWired(waitCtx, dnsPod, created.UID); err != nil {
		return err
	}
	return e.SetDNS(e.opts.Resolve)
}

// SetDNS replaces the DNS server's answers; the controller sees them at
// its next lookup of each name.
func (e *Environment) SetDNS(answers map[string][]netip.Addr) error {
	if answers == nil {
		answers = map[string][]netip.Addr{}
	}
	return e.dns.proc.setDNS(answers)
}

// DNSServer is the DNS server pod's address.
func (e *Environment) DNSServer() netip.Addr { return e.dns.ip }

// ControllerEnv is the configuration hcc-controller runs with: the shipped
// one (deploy/base), the local endpoints, the dataplane's ranges, then
// opts.ControllerEnv.
func (e *Environment) controllerEnv(port int) ([]string, error) {
	shipped, err := controlplane.ShippedEnv(filepath.Join(e.root, "deploy", "base", "controller", "deployment.yaml"))
	if err != nil {
		return nil, err
	}
	env := append(shipped,
		"POD_NAME=hcc-dataplane",
		"HCC_LEADER_ELECT=false",
		"HCC_CONTROLLER_PORT="+strconv.Itoa(port),
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET=dataplane-hmac-secret",
		"CONTROL_API_BASE_URL="+e.controlAPI.URL,
		"MCP_HOST_GATEWAY_URL="+e.controlAPI.URL,
		"CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS="+controlplane.StorageClass,
		// Pods reach the API server at the node's address.
		"CONTEXT_MAPPER_K8S_API_CIDRS="+NodeIP.String()+"/32",
		// The cluster's own ranges: pods, Services, the node.
		"HCC_EGRESS_DENY_CIDRS="+controlplane.PodCIDR+","+controlplane.ServiceClusterIPRange+","+NodeIP.String()+"/32",
		"HCC_EXTERNAL_EGRESS_DNS_SERVER="+netip.AddrPortFrom(e.dns.ip, 53).String(),
		"LOG_LEVEL=debug",
	)
	return append(env, e.opts.ControllerEnv...), nil
}

func (e *Environment) startController(ctx context.Context) error {
	api, err := devcontrolapi.New(devcontrolapi.Options{HMACSecret: []byte("dataplane-hmac-secret"), MigrationAudience: devcontrolapi.DefaultMigrationAudience})
	if err != nil {
		return err
	}
	e.controlAPI = httptest.NewServer(api.Handler())
	kubeconfig, err := e.cp.WriteImpersonatingKubeconfig(controllerUser, "system:serviceaccounts", "system:serviceaccounts:control-plane")
	if err != nil {
		return err
	}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		return err
	}
	env, err := e.controllerEnv(ports[0])
	if err != nil {
		return err
	}
	bin := filepath.Join(os.Getenv(hccBinEnv), "hcc-controller")
	e.controller, err = controlplane.StartProcess("hcc-controller", bin, []string{"--kubeconfig", kubeconfig},
		append(controlplane.BinaryEnv(), env...), filepath.Join(e.opts.LogDir, "hcc-controller.log"))
	if err != nil {
		return err
	}
	e.ControllerURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-e.controller.Done():
			return false, fmt.Errorf("hcc-controller exited: %v\n%s", e.controller.Err(), e.controller.LogTail(30))
		default:
		}
		return e.controllerReady(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("hcc-controller not ready: %w\n%s", err, e.controller.LogTail(30))
	}
	return nil
}

// controllerReady reports whether hcc-controller's /ready answers 200: its
// NetworkPolicy operator has certified that no stale allow survives.
func (e *Environment) controllerReady(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ControllerURL+"/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Close stops everything Start started, the cluster last, and removes the
// state (and, unless Options.LogDir was given, the logs).
func (e *Environment) Close() {
	if e.controller != nil {
		_ = e.controller.Stop()
	}
	if e.controlAPI != nil {
		e.controlAPI.Close()
	}
	if e.stopAgent != nil {
		e.stopAgent()
		<-e.agentDone
	}
	e.outsideMu.Lock()
	if e.outside != nil {
		e.outside.stop()
	}
	e.outsideMu.Unlock()
	if e.kubeRouter != nil {
		_ = e.kubeRouter.stop()
	}
	if e.cp != nil {
		_ = e.cp.Close()
	}
	_ = os.RemoveAll(e.stateDir)
}

// Sync waits until kube-router has programmed everything the API server
// holds now, and returns when the sync that did started.
func (e *Environment) Sync(ctx context.Context) (time.Time, error) {
	return e.kubeRouter.sync(ctx, time.Minute)
}

// barePod is a pod the dataplane runs: one container, never pulled (kwok
// runs it), listening on ports.
func barePod(namespace, name string, labels map[string]string, ports []Port) *corev1.Pod {
	c := corev1.Container{Name: "responder", Image: "hcc.local/dataplane-responder:none"}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: p.Port, Protocol: p.Protocol})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{c},
			// kwok's node carries no taints, and no kubelet ever reads this.
			AutomountServiceAccountToken:  new(bool),
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

// outsideNamespace answers for every address outside the cluster a flow
// sends to: one namespace holding each as a /32, routed from the node.
func (e *Environment) ensureOutside(addrs map[netip.Addr][]Port) error {
	e.outsideMu.Lock()
	defer e.outsideMu.Unlock()
	if e.outside == nil {
		p, err := startNSProcess("external", "hcc-outside", socketPath(e.stateDir, 0), filepath.Join(e.opts.LogDir, "outside.log"))
		if err != nil {
			return err
		}
		if err := p.plug(); err != nil {
			p.stop()
			return err
		}
		e.outside = p
	}
	var newAddrs []netip.Addr
	var ports []Port
	for addr, ps := range addrs {
		if !slices.Contains(e.outside.addrs, addr) {
			newAddrs = append(newAddrs, addr)
		}
		for _, p := range ps {
			if !slices.Contains(e.outsidePorts, p) && !slices.Contains(ports, p) {
				ports = append(ports, p)
			}
		}
	}
	slices.SortFunc(newAddrs, func(a, b netip.Addr) int { return a.Compare(b) })
	if err := e.outside.addAddrs(newAddrs...); err != nil {
		return err
	}
	if err := e.outside.listen(ports); err != nil {
		return err
	}
	e.outsidePorts = append(e.outsidePorts, ports...)
	return nil
}

// ensureNamespaces creates the namespaces that do not exist yet.
func (e *Environment) ensureNamespaces(ctx context.Context, names []string) error {
	for _, name := range names {
		_, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found above the working directory")
		}
		dir = parent
	}
}

// ApplyFiles applies the objects of the YAML files (or folders) in paths,
// as the cluster's admin.
func (e *Environment) ApplyFiles(ctx context.Context, paths ...string) error {
	return controlplane.ApplyFiles(ctx, e.cp.Config(), paths...)
}

// DeleteFiles deletes the objects of the YAML files (or folders) in paths.
func (e *Environment) DeleteFiles(ctx context.Context, paths ...string) error {
	return controlplane.DeleteFiles(ctx, e.cp.Config(), paths...)
}
