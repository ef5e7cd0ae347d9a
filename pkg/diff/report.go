package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// writesOf turns the overlay's writes into the report's, in a stable
// order, and counts the status writes apart. A write that fails as an
// earlier one did — the same verb on the same object, the same error — is
// listed once: how often a refused create is tried again depends on how
// often its owner happens to be synced in the first passes, which says
// nothing a second line would.
func writesOf(recorded []write) (out []Write, statusWrites int) {
	out = []Write{}
	failed := map[string]bool{}
	for _, w := range recorded {
		if w.subresource != "" {
			statusWrites++
			continue
		}
		if w.err != nil {
			key := strings.Join([]string{w.verb, w.resource.String(), w.namespace, w.name, w.err.Error()}, "\x00")
			if failed[key] {
				continue
			}
			failed[key] = true
		}
		obj := w.after
		if obj == nil {
			obj = w.before
		}
		row := Write{
			Controller: controllerOf(obj),
			Verb:       w.verb,
			Action:     w.verb,
			Group:      w.resource.Group,
			Resource:   w.resource.Resource,
			Kind:       kindOf(obj, w.resource.Resource),
			Namespace:  w.namespace,
			Name:       w.name,
		}
		if w.err != nil {
			row.Error = w.err.Error()
		}
		if w.verb == "update" || w.verb == "patch" {
			row.Action = "update"
			if w.before != nil && w.after != nil {
				row.Fields = changedFields(w.before, w.after)
				if takesOver(w.before, w.after) {
					row.Action = "take-over"
				}
			}
		}
		out = append(out, row)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return byObject(out[i].Kind, out[i].Namespace, out[i].Name, out[j].Kind, out[j].Namespace, out[j].Name)
	})
	return out, statusWrites
}

// controllerOf names the reconciler that writes obj, from the labels HCC
// puts on what it writes (docs/names.md).
func controllerOf(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if obj == nil || err != nil {
		return ""
	}
	if kinds, _, err := scheme.ObjectKinds(obj); err == nil && kindController[kinds[0].Kind] != "" {
		return kindController[kinds[0].Kind] // its finalizer
	}
	l := m.GetLabels()
	switch l[names.LabelPolicyType] {
	case "deny-all", "infrastructure", "context-allow", "rpc-proxy-egress", "external-egress", "recipe-binding":
		return "netpol"
	}
	switch {
	case l[names.LabelHost] != "":
		return "host"
	case l[names.LabelSharedFileSystem] != "":
		return "sharedfs"
	case l[names.LabelGlobalFileSystem] != "":
		return "globalfs"
	case l[names.LabelMcpServer] != "":
		return "mcpserver"
	}
	return ""
}

func kindOf(obj runtime.Object, resource string) string {
	if obj != nil {
		if kinds, _, err := scheme.ObjectKinds(obj); err == nil {
			return kinds[0].Kind
		}
	}
	return resource
}

// takesOver reports whether an update makes a different owner the
// object's controller.
func takesOver(before, after runtime.Object) bool {
	b, err1 := meta.Accessor(before)
	a, err2 := meta.Accessor(after)
	if err1 != nil || err2 != nil {
		return false
	}
	now := metav1.GetControllerOfNoCopy(a)
	was := metav1.GetControllerOfNoCopy(b)
	return now != nil && (was == nil || was.UID != now.UID)
}

// ignoredFields are set by the API server, not by the writer.
var ignoredFields = []string{"resourceVersion", "uid", "generation", "creationTimestamp", "managedFields"}

// changedFields lists the paths whose values differ between before and
// after, outside status and the fields the API server sets: maps by key,
// lists of one length element by element, anything else as a whole. A
// Secret's data is named by key, never quoted.
func changedFields(before, after runtime.Object) []string {
	b, err1 := runtime.DefaultUnstructuredConverter.ToUnstructured(before)
	a, err2 := runtime.DefaultUnstructuredConverter.ToUnstructured(after)
	if err1 != nil || err2 != nil {
		return nil
	}
	for _, m := range []map[string]any{a, b} {
		delete(m, "status")
		if md, ok := m["metadata"].(map[string]any); ok {
			for _, f := range ignoredFields {
				delete(md, f)
			}
		}
	}
	var out []string
	diffValues("", b, a, &out)
	sort.Strings(out)
	return out
}

func diffValues(path string, b, a any, out *[]string) {
	if reflect.DeepEqual(b, a) {
		return
	}
	bm, ok1 := b.(map[string]any)
	am, ok2 := a.(map[string]any)
	if ok1 && ok2 {
		keys := map[string]bool{}
		for k := range bm {
			keys[k] = true
		}
		for k := range am {
			keys[k] = true
		}
		for k := range keys {
			diffValues(join(path, k), bm[k], am[k], out)
		}
		return
	}
	bl, ok1 := b.([]any)
	al, ok2 := a.([]any)
	if ok1 && ok2 && len(bl) == len(al) {
		for i := range bl {
			diffValues(fmt.Sprintf("%s[%d]", path, i), bl[i], al[i], out)
		}
		return
	}
	*out = append(*out, path)
}

// join appends key to path, bracketed when it is no plain identifier (a
// label or annotation key).
func join(path, key string) string {
	if strings.ContainsAny(key, "./") {
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// netpolEvents are the Warning events only the NetworkPolicy operator (or
// its egress coordinator) records.
var netpolEvents = map[string]string{
	reasons.EventRecipeBindingRejected: "netpol",
	reasons.EventDuplicateContextID:    "netpol",
	reasons.EventGrantsWithheld:        "netpol",
	reasons.EventEgressBindingRejected: "egress",
}

// netpolUnmanaged is how the NetworkPolicy operator's UnmanagedConflict
// message reads; the kit's, for every other reconciler's children, says
// "is not written".
const netpolUnmanaged = "is needed by HCC but held by"

// refusals are the Warning events, once each: a Blocked event is a block
// whose reason is the block's; any other is a refusal. A block the
// object's live status already shows (a False condition of that reason) is
// no change, and is left out: a reconciler reports blocks from its own
// memory, so a fresh one reports every block again.
func (r *recorder) refusals(shown func(kind, namespace, name string) []metav1.Condition) []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []Refusal{}
	seen := map[Refusal]bool{}
	// A block released later in the run (a server waiting for the first
	// pass's egress gate) was no block of the leader's settled state.
	released := map[string]int{} // object → index of its last Released event
	for i, e := range r.events {
		if e.reason == reasons.EventReleased {
			released[e.kind+"/"+e.namespace+"/"+e.name] = i
		}
	}
	for i, e := range r.events {
		if e.eventType != corev1.EventTypeWarning {
			continue
		}
		if last, ok := released[e.kind+"/"+e.namespace+"/"+e.name]; ok && e.reason == reasons.EventBlocked && last > i {
			continue
		}
		ref := Refusal{Type: "refuse", Kind: e.kind, Namespace: e.namespace, Name: e.name, Reason: e.reason, Message: e.msg}
		if e.reason == reasons.EventBlocked {
			ref.Type = "block"
			if reason, message, ok := strings.Cut(e.msg, ": "); ok {
				ref.Reason, ref.Message = reason, message
			}
		}
		ref.Controller = eventController(e, r.events[:i])
		if ref.Type == "block" && showsBlock(shown(e.kind, e.namespace, e.name), ref.Reason) {
			continue
		}
		if !seen[ref] {
			seen[ref] = true
			out = append(out, ref)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return byObject(out[i].Kind, out[i].Namespace, out[i].Name, out[j].Kind, out[j].Namespace, out[j].Name)
	})
	return out
}

// byObject orders rows by kind, namespace and name.
func byObject(kindA, nsA, nameA, kindB, nsB, nameB string) bool {
	if kindA != kindB {
		return kindA < kindB
	}
	if nsA != nsB {
		return nsA < nsB
	}
	return nameA < nameB
}

func showsBlock(conditions []metav1.Condition, reason string) bool {
	for _, c := range conditions {
		if c.Status == metav1.ConditionFalse && c.Reason == reason {
			return true
		}
	}
	return false
}

// eventController names the reconciler of a Warning event: by its reason
// when only one records it; else by the clerum.io kind it is on; else (the
// object holding a name a reconciler needs, which the kit reports on both
// the owner and that object) the reconciler of the event just before with
// the same message.
func eventController(e event, earlier []event) string {
	if c, ok := netpolEvents[e.reason]; ok {
		return c
	}
	if e.reason == reasons.EventUnmanagedConflict && strings.Contains(e.msg, netpolUnmanaged) {
		return "netpol"
	}
	if c := kindController[e.kind]; c != "" {
		return c
	}
	for i := len(earlier) - 1; i >= 0; i-- {
		if earlier[i].msg == e.msg && earlier[i].reason == e.reason {
			return eventController(earlier[i], earlier[:i])
		}
	}
	return ""
}

// kindController is the reconciler of each clerum.io kind's children.
var kindController = map[string]string{
	"McpServer":        "mcpserver",
	"Host":             "host",
	"SharedFileSystem": "sharedfs",
	"GlobalFileSystem": "globalfs",
}

// WriteJSON writes r as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r for a person: one line per write and refusal, then
// the NetworkPolicy verdict when it is not plain (not certified, or a cap
// would hold policies back). An empty report writes nothing.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !r.Empty() {
		fmt.Fprintln(tw, "ACTION\tKIND\tNAMESPACE\tNAME\tDETAIL")
	}
	for _, x := range r.Writes {
		detail := strings.Join(x.Fields, ", ")
		if x.Error != "" {
			detail = "fails: " + x.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", x.Action, x.Kind, x.Namespace, x.Name, detail)
	}
	for _, x := range r.Refusals {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s: %s\n", x.Type, x.Kind, x.Namespace, x.Name, x.Reason, oneLine(x.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	np := r.NetworkPolicy
	if !np.Certified {
		fmt.Fprintf(w, "\nNetworkPolicy readiness would not be certified: %s\n", oneLine(np.Message))
	}
	if len(np.HeldBack) > 0 {
		fmt.Fprintf(w, "\nThe orphan delete cap (%s) would hold back %d unexplained policies:\n", np.CapRule, len(np.HeldBack))
		for _, h := range np.HeldBack {
			fmt.Fprintf(w, "  %s/%s\n", h.Namespace, h.Name)
		}
	}
	return nil
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
