// Package controlplane runs a real etcd and kube-apiserver for integration
// and end-to-end tests.
//
// Start brings both up on free loopback ports with freshly generated
// certificates, RBAC authorization and the repository's CRDs installed, and
// tears them down when the test ends:
//
//	cp := controlplane.Start(t, controlplane.Options{})
//	client := kubernetes.NewForConfigOrDie(cp.Config())
//
// The binaries come from $HCC_CONTROLPLANE_BIN, or else from
// hack/controlplane, which builds them on first use (minutes; run
// `cd hack/controlplane && go run . ensure` beforehand, or give go test a
// -timeout long enough).
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	etcdReadyTimeout      = 30 * time.Second
	apiserverReadyTimeout = 2 * time.Minute
	// startAttempts is how often a start is tried with new ports when a
	// picked port was taken before the process could bind it.
	startAttempts = 3
	// restartAttempts and restartRetryDelay bound how long StartAPIServer
	// waits for its old port to be free again.
	restartAttempts   = 10
	restartRetryDelay = time.Second
	// ServiceClusterIPRange is required by kube-apiserver; nothing routes
	// to it in tests. A /16 holds the thousands of Services the convergence
	// benchmarks create (a /24 runs out at 254).
	ServiceClusterIPRange = "10.0.0.0/16"
)

// Options configures Start.
type Options struct {
	// CRDDir holds the CustomResourceDefinition manifests to install.
	// Default: deploy/crds in the repository (the directory holding
	// go.mod, found by walking up from the working directory). A missing
	// or empty directory installs nothing.
	CRDDir string
	// Cluster also runs kube-controller-manager, kube-scheduler and kwok
	// with one fake node, a default StorageClass and static
	// PersistentVolumes (docs/local-cluster.md): the cluster of make run and
	// the end-to-end tests.
	Cluster bool
	// Logf receives progress lines; Start defaults it to t.Logf.
	Logf func(format string, args ...any)
	// AuditPolicy, when set, is a kube-apiserver audit policy (YAML): the
	// events it selects are written, one JSON object per line and before
	// each request is answered, to AuditLog. Tests count writes with it.
	AuditPolicy string
	// NodeIP is the fake node's address (kwok --node-ip): the Node's
	// InternalIP and every pod's hostIP. Default 127.0.0.1.
	NodeIP string
	// APIServerPort, when set, is kube-apiserver's port, served on every
	// address of the network namespace instead of a free loopback port.
	// The dataplane tests run the cluster in a network namespace of its
	// own, where pods reach the API server at the node's address on 443
	// (docs/local-cluster.md#the-dataplane).
	APIServerPort int
}

// ControlPlane is a running etcd and kube-apiserver. Its methods are not
// safe for concurrent use, except Config, ImpersonatingConfig and
// Kubeconfig.
type ControlPlane struct {
	t      testing.TB // nil outside a test (New)
	opts   Options
	dir    string // temporary directory: certificates, data, logs
	binDir string
	pki    *pki

	etcd    *process
	etcdURL string

	apiserver     *process
	apiserverPort int
	// readyzClient probes /readyz as the admin user.
	readyzClient *http.Client

	// cluster are the processes of Options.Cluster, in start order.
	cluster []*process

	kubeconfig string
	stopped    bool
}

// Start runs etcd and kube-apiserver (and, with opts.Cluster, the rest of
// the local cluster), installs the CRDs of opts.CRDDir and returns once they
// are served. It fails the test if anything goes wrong, and registers a
// cleanup that stops everything and, if the test failed, logs the end of
// every process log.
func Start(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	c, err := New(opts)
	if c != nil {
		c.t = t
		t.Cleanup(c.cleanup)
	}
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	return c
}

// New is Start outside a test (make run): the caller must Close the
// returned control plane. On an error, whatever started is stopped again,
// and the returned control plane (non-nil once its directory exists) still
// names its logs.
func New(opts Options) (*ControlPlane, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	bins, err := binDir(opts.Cluster)
	if err != nil {
		return nil, err
	}
	crds, err := loadCRDs(opts.CRDDir)
	if err != nil {
		return nil, fmt.Errorf("reading CRDs: %w", err)
	}
	dir, err := os.MkdirTemp("", "hcc-controlplane-")
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{opts: opts, dir: dir, binDir: bins}
	start := time.Now()
	if err := c.start(); err != nil {
		return c, c.failed(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := installCRDs(ctx, c.Config(), crds); err != nil {
		return c, c.failed(err)
	}
	if opts.Cluster {
		if err := c.startCluster(ctx); err != nil {
			return c, c.failed(err)
		}
	}
	opts.Logf("control plane up in %s at %s (%d CRDs installed)",
		time.Since(start).Round(time.Millisecond), c.url(), len(crds))
	return c, nil
}

// failed stops what started when a test cleanup will not (New's caller
// gets only the error) and returns err.
func (c *ControlPlane) failed(err error) error {
	if c.t == nil {
		c.logTails()
		_ = c.Close()
	}
	return err
}

func (c *ControlPlane) start() error {
	var err error
	if c.pki, err = newPKI(c.dir); err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	if c.readyzClient, err = rest.HTTPClientFor(c.Config()); err != nil {
		return err
	}
	if err := withFreePorts(c.startEtcd); err != nil {
		return err
	}
	if err := withFreePorts(c.startAPIServerOnNewPort); err != nil {
		return err
	}
	return c.writeKubeconfig()
}

// withFreePorts retries start, which picks its ports anew each time, when
// another process took a port between picking and binding it.
func withFreePorts(start func() error) error {
	var err error
	for range startAttempts {
		if err = start(); !errors.Is(err, errAddressInUse) {
			return err
		}
	}
	return err
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// The listeners are held until all ports are picked so that they differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *ControlPlane) startEtcd() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	dataDir := filepath.Join(c.dir, "etcd")
	// A failed attempt may have initialized a member with other ports.
	if err := os.RemoveAll(dataDir); err != nil {
		return err
	}
	args := []string{
		"--name=hcc-test",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=hcc-test=" + peerURL,
		// Durability is pointless for a throwaway test store; fsync is
		// what makes etcd slow on busy disks.
		"--unsafe-no-fsync=true",
	}
	p, err := startProcess("etcd", filepath.Join(c.binDir, "etcd"), args, c.logPath("etcd"))
	if err != nil {
		return err
	}
	c.etcd = p
	c.etcdURL = clientURL
	return p.waitReady(etcdReadyTimeout, func(ctx context.Context) error {
		return probe(ctx, http.DefaultClient, clientURL+"/health")
	})
}

func (c *ControlPlane) startAPIServerOnNewPort() error {
	if c.opts.APIServerPort != 0 {
		c.apiserverPort = c.opts.APIServerPort
		return c.runAPIServer()
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	c.apiserverPort = ports[0]
	return c.runAPIServer()
}

// runAPIServer starts kube-apiserver on c.apiserverPort and waits for
// /readyz, which also covers etcd connectivity and the CRD and RBAC
// bootstrap post-start hooks.
func (c *ControlPlane) runAPIServer() error {
	bind := "127.0.0.1"
	if c.opts.APIServerPort != 0 {
		bind = "0.0.0.0"
	}
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=" + bind,
		"--advertise-address=127.0.0.1",
		// The endpoint reconciler publishes the advertise address as the
		// endpoint of the default/kubernetes service and refuses a
		// loopback one; nothing in a test reaches the API that way.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(c.apiserverPort),
		"--tls-cert-file=" + c.pki.servingCertFile,
		"--tls-private-key-file=" + c.pki.servingKeyFile,
		"--client-ca-file=" + c.pki.caFile,
		"--service-account-key-file=" + c.pki.serviceAccountPub,
		"--service-account-signing-key-file=" + c.pki.serviceAccountKey,
		"--service-account-issuer=" + c.url(),
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		// The ServiceAccount admission plugin rejects pods in namespaces
		// without a default service account, which only
		// kube-controller-manager creates; as in controller-runtime's
		// envtest, tests should not have to create one by hand.
		"--disable-admission-plugins=ServiceAccount",
	}
	if c.opts.AuditPolicy != "" {
		policy := filepath.Join(c.dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(c.opts.AuditPolicy), 0o644); err != nil {
			return err
		}
		args = append(args,
			"--audit-policy-file="+policy,
			"--audit-log-path="+c.AuditLog(),
			"--audit-log-format=json",
			// blocking: an event is written before its response is sent,
			// so a test that saw a write sees its event.
			"--audit-log-mode=blocking",
			"--audit-log-maxsize=0",
		)
	}
	p, err := startProcess("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"), args, c.logPath("kube-apiserver"))
	if err != nil {
		return err
	}
	c.apiserver = p
	return p.waitReady(apiserverReadyTimeout, func(ctx context.Context) error {
		return probe(ctx, c.readyzClient, c.url()+"/readyz")
	})
}

// probe succeeds if GET url answers 200 OK.
func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func (c *ControlPlane) url() string {
	return fmt.Sprintf("https://127.0.0.1:%d", c.apiserverPort)
}

func (c *ControlPlane) logPath(name string) string {
	return filepath.Join(c.dir, name+".log")
}

// Config returns a new client config for the admin user (group
// system:masters, which RBAC lets do anything), verifying the server
// against the test CA.
func (c *ControlPlane) Config() *rest.Config {
	return &rest.Config{
		Host: c.url(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   slices.Clone(c.pki.caPEM),
			CertData: slices.Clone(c.pki.adminCertPEM),
			KeyData:  slices.Clone(c.pki.adminKeyPEM),
		},
		// client-go's default of 5 requests per second throttles tests
		// that create many objects; this server serves only the test.
		QPS:   500,
		Burst: 1000,
	}
}

// ImpersonatingConfig returns the admin config acting as user in groups,
// to test what RBAC lets that user do. The server adds
// system:authenticated itself.
func (c *ControlPlane) ImpersonatingConfig(user string, groups ...string) *rest.Config {
	config := c.Config()
	config.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return config
}

// Kubeconfig returns the path of a kubeconfig file for the admin user,
// for tools such as kubectl --kubeconfig.
func (c *ControlPlane) Kubeconfig() string {
	return c.kubeconfig
}

func (c *ControlPlane) writeKubeconfig() error {
	const name = "hcc-test"
	config := clientcmdapi.NewConfig()
	config.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   c.url(),
		CertificateAuthorityData: c.pki.caPEM,
	}
	config.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: c.pki.adminCertPEM,
		ClientKeyData:         c.pki.adminKeyPEM,
	}
	config.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	config.CurrentContext = name
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	return clientcmd.WriteToFile(*config, c.kubeconfig)
}

// StopAPIServer stops kube-apiserver, leaving etcd and its data running,
// e.g. to test how clients cope with an outage. It does nothing if
// kube-apiserver is not running.
func (c *ControlPlane) StopAPIServer() error {
	if c.apiserver == nil {
		return nil
	}
	err := c.apiserver.stop()
	c.apiserver = nil
	return err
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same port with the same certificates and over the same etcd, so existing
// configs and clients keep working, and waits until it is ready.
func (c *ControlPlane) StartAPIServer() error {
	switch {
	case c.stopped:
		return errors.New("control plane already stopped")
	case c.apiserver != nil:
		return errors.New("kube-apiserver already running")
	}
	// The port was free while the old server held it; between its exit
	// and this bind another process may take it for a moment (a client's
	// ephemeral port, a test's freshly picked one). The port cannot change
	// — configs and clients point at it — so wait and try again.
	var err error
	for range restartAttempts {
		if err = c.runAPIServer(); !errors.Is(err, errAddressInUse) {
			return err
		}
		c.apiserver = nil
		time.Sleep(restartRetryDelay)
	}
	return err
}

// Stop stops every process and removes the temporary directory. It is
// called by the test's cleanup; calling it again does nothing. Failures are
// reported with t.Errorf.
func (c *ControlPlane) Stop() {
	if err := c.Close(); err != nil {
		c.t.Errorf("control plane: %v", err)
	}
}

// Close stops every process, the cluster's first and etcd last, and
// removes the temporary directory. Calling it again does nothing.
func (c *ControlPlane) Close() error {
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	// kube-apiserver's clients first, then kube-apiserver, so that nothing
	// logs connection errors while shutting down.
	for i := len(c.cluster) - 1; i >= 0; i-- {
		errs = append(errs, c.cluster[i].stop())
	}
	c.cluster = nil
	errs = append(errs, c.StopAPIServer())
	if c.etcd != nil {
		errs = append(errs, c.etcd.stop())
		c.etcd = nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", c.dir, err))
	}
	return errors.Join(errs...)
}

// cleanup shows the end of the logs if the test failed, while they still
// exist, then stops everything.
func (c *ControlPlane) cleanup() {
	if c.t.Failed() && !c.stopped {
		c.logTails()
	}
	c.Stop()
}

// logTails shows the end of every process log through opts.Logf.
func (c *ControlPlane) logTails() {
	for _, name := range c.logNames() {
		c.opts.Logf("last %d lines of the %s log:\n%s", logTailLines, name, fileTail(c.logPath(name), logTailLines))
	}
}

// AuditLog is the path of the audit log of Options.AuditPolicy.
func (c *ControlPlane) AuditLog() string { return filepath.Join(c.dir, "audit.log") }

// Dir is the control plane's temporary directory: certificates, data and
// one log per process (NAME.log).
func (c *ControlPlane) Dir() string { return c.dir }
