package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The node: a network namespace of its own, created by starting this same
// binary again inside a new one (CLONE_NEWNET). Everything of a run lives
// in it — etcd, kube-apiserver, the controllers, kwok, kube-router, HCC's
// binaries — on its loopback, and every pod and outside destination hangs
// off it by a veth pair. The namespace exists only as long as its
// processes do, so nothing outlives a run, and nothing of it touches the
// machine's own network.

const roleNode = "node"

// NodeIP is the node's address: kwok's node IP (the Node's InternalIP and
// every pod's hostIP, which is how kube-router finds the pods it enforces),
// the pods' gateway, and the address kube-apiserver answers pods on, port
// 443 (CONTEXT_MAPPER_K8S_API_CIDRS is NodeIP/32). It is on the node's
// loopback interface (this kernel may lack dummy interfaces); the node
// still answers ARP for it on every pod's veth, as for any of its own
// addresses.
var NodeIP = netip.MustParseAddr("10.250.0.1")

// InNode reports whether this process runs in the node's namespace.
func InNode() bool { return os.Getenv(roleEnv) == roleNode }

// ErrUnavailable is returned when this machine cannot run the dataplane:
// no network namespaces (not root, or no CAP_SYS_ADMIN and CAP_NET_ADMIN),
// or iptables, ipset or ip missing. Its message says which and what to do;
// the callers skip with it, never silently.
var ErrUnavailable = errors.New("the dataplane cannot run on this machine")

// requiredCommands are the programs the node needs: iproute2 for links
// and routes, iptables and ipset for kube-router.
var requiredCommands = []string{"ip", "iptables", "iptables-save", "iptables-restore", "ipset"}

// Check reports whether this machine can run the dataplane: the commands
// it needs are installed and this process may create network namespaces.
// It creates (and at once drops) one namespace to find out.
func Check() error {
	var missing []string
	for _, name := range requiredCommands {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not installed (hack/dataplane-deps.sh installs iproute2, iptables and ipset with apt-get, as root)",
			ErrUnavailable, strings.Join(missing, ", "))
	}
	cmd := exec.Command("ip", "link", "show", "lo")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: cannot create a network namespace (needs root, or CAP_SYS_ADMIN and CAP_NET_ADMIN): %v %s",
			ErrUnavailable, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// RunInNode starts this binary again, with the same arguments and extra
// environment variables, in a new network namespace (the node), passes its
// output through and returns its exit status. The caller checks first
// (Check) and builds what needs the network before: inside, only the
// node's loopback and its pods are reachable.
func RunInNode(env ...string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(append(os.Environ(), env...), roleEnv+"="+roleNode)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Pdeathsig: if this process dies, the node goes with it, and with
	// the node every process and namespace of the run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("starting the node namespace: %w", err)
	}
	return 0, nil
}

// setUpNode configures the node's namespace: loopback up with NodeIP,
// forwarding on, reverse-path filtering off (a pod's
// packets come in on its own veth, and the node's replies to them leave
// from NodeIP), and the node's own port-unreachable errors dropped.
//
// kube-router rejects a packet no policy allows with an ICMP
// port-unreachable, which makes a denied TCP connection fail at once as
// "refused" — indistinguishable, to the prober, from a pod that let the
// packet in but has nothing listening. The flows contract reads "denied"
// as "times out" and a refusal as a failure of its own, so the node
// drops the rejections it generates itself (they pass its OUTPUT hook); a
// refusal can then only come from the destination. A rejection from a
// pod's own kernel is forwarded, not generated, and still arrives.
func setUpNode() error {
	steps := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", NodeIP.String() + "/32", "dev", "lo"},
		{"iptables", "-t", "mangle", "-A", "OUTPUT", "-p", "icmp", "--icmp-type", "port-unreachable",
			"-m", "comment", "--comment", "hcc dataplane: denied reads as a timeout", "-j", "DROP"},
	}
	for _, args := range steps {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	for key, value := range map[string]string{
		"net/ipv4/ip_forward":              "1",
		"net/ipv4/conf/all/rp_filter":      "0",
		"net/ipv4/conf/default/rp_filter":  "0",
		"net/ipv4/conf/default/forwarding": "1",
	} {
		// /proc/sys/net shows the namespace of the process that opens it.
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(key, "/", "."), value, err)
		}
	}
	return nil
}
