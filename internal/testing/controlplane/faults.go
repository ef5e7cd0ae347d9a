package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"syscall"
)

// CompactEtcd compacts etcd's key-value history up to its current
// revision, physically, through etcd's JSON gateway (the v3 API over
// HTTP, on the client URL): a watch or list from any older resourceVersion
// that reaches etcd then fails with "required revision has been
// compacted", and kube-apiserver answers it "too old resource version".
// It returns the revision compacted to.
func (c *ControlPlane) CompactEtcd(ctx context.Context) (int64, error) {
	var status struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// A range read of one key carries the store's current revision.
	if err := c.etcdCall(ctx, "/v3/kv/range", map[string]any{"key": "Lw=="}, &status); err != nil { // "/"
		return 0, err
	}
	rev, err := strconv.ParseInt(status.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd revision %q: %w", status.Header.Revision, err)
	}
	if err := c.etcdCall(ctx, "/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

// etcdCall POSTs body as JSON to path on etcd's client URL and decodes the
// answer into out (nil: discarded).
func (c *ControlPlane) etcdCall(ctx context.Context, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.etcdURL+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, answer)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}

// Signal sends sig to the process group: SIGSTOP freezes the process as a
// paused VM or a long GC stall would, and SIGCONT resumes it.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.p.cmd.Process.Pid, sig)
}
