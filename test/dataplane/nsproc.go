package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// nsProcess is a pod process (podproc.go) seen from the node: a child in a
// network namespace of its own, the node's end of its veth pair, and a
// client for its control socket.
type nsProcess struct {
	identity string
	// hostLink is the node's end of the veth pair; the other end is eth0
	// in the process's namespace.
	hostLink string
	// addrs are the addresses routed to it.
	addrs  []netip.Addr
	cmd    *exec.Cmd
	client *http.Client
	done   chan struct{}
}

// podLink is the name of a pod's end of its veth pair.
const podLink = "eth0"

// startNSProcess starts a pod process for identity in a new network
// namespace, joined to the node by a veth pair whose node end is hostLink
// (down, and without routes, until plug). Its output goes to logPath.
func startNSProcess(identity, hostLink, socket, logPath string) (*nsProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(podConfig{Identity: identity, Socket: socket})
	if err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	_ = os.Remove(socket)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), roleEnv+"="+rolePod, podConfigEnv+"="+string(cfg))
	cmd.Stdout, cmd.Stderr = log, log
	// A namespace of its own, which lives exactly as long as the process:
	// killing it removes the namespace, and with it the veth pair.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the process of %s: %w", identity, err)
	}
	p := &nsProcess{
		identity: identity,
		hostLink: hostLink,
		cmd:      cmd,
		done:     make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
		}},
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := p.waitHealthy(10 * time.Second); err != nil {
		p.stop()
		return nil, err
	}
	// The pod's end is created inside its namespace, so it never exists in
	// the node's under a name that could clash.
	if err := ip("link", "add", hostLink, "type", "veth", "peer", "name", podLink, "netns", fmt.Sprint(cmd.Process.Pid)); err != nil {
		p.stop()
		return nil, err
	}
	if err := p.call(http.MethodPost, "/configure", linkConfig{Name: podLink, Gateway: NodeIP}, nil); err != nil {
		p.stop()
		return nil, fmt.Errorf("configuring %s: %w", identity, err)
	}
	return p, nil
}

func (p *nsProcess) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := p.call(http.MethodGet, "/health", nil, nil)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("the process of %s exited: %v", p.identity, p.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the process of %s did not answer in %s: %w", p.identity, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addAddrs puts addrs on the process's link and routes them to it from the
// node. The node's end must be up (plug) for the routes to take.
func (p *nsProcess) addAddrs(addrs ...netip.Addr) error {
	if err := p.call(http.MethodPost, "/addrs", linkConfig{Name: podLink, Addrs: addrs}, nil); err != nil {
		return err
	}
	for _, addr := range addrs {
		if err := ip("route", "replace", addr.String()+"/32", "dev", p.hostLink, "scope", "link", "src", NodeIP.String()); err != nil {
			return err
		}
		p.addrs = append(p.addrs, addr)
	}
	return nil
}

// plug brings the node's end of the veth pair up: from now on packets
// flow (once addAddrs routed the addresses).
func (p *nsProcess) plug() error { return ip("link", "set", p.hostLink, "up") }

// listen makes the process answer on ports too.
func (p *nsProcess) listen(ports []Port) error {
	if len(ports) == 0 {
		return nil
	}
	return p.call(http.MethodPost, "/listen", ports, nil)
}

// setDNS replaces the process's DNS answers (names to addresses).
func (p *nsProcess) setDNS(answers map[string][]netip.Addr) error {
	return p.call(http.MethodPut, "/dns", answers, nil)
}

// probe has the process try one flow.
func (p *nsProcess) probe(ctx context.Context, req probeRequest) (probeResult, error) {
	var res probeResult
	err := p.callContext(ctx, http.MethodPost, "/probe", req, &res)
	return res, err
}

// stop kills the process; its network namespace and veth pair go with it.
func (p *nsProcess) stop() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	// The kernel removes the pair when the namespace goes; a node end left
	// from a process that never got its pair is removed here.
	_ = exec.Command("ip", "link", "del", p.hostLink).Run()
}

func (p *nsProcess) call(method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.callContext(ctx, method, path, in, out)
}

func (p *nsProcess) callContext(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://pod"+path, body)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// socketPath is a short path for a control socket (a Unix socket path
// holds at most 107 bytes).
func socketPath(dir string, n int) string { return filepath.Join(dir, fmt.Sprintf("p%d.sock", n)) }
